/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The dashboard's routes: GET / (its page) and GET /ui/… (its scripts, styles and the terminal library),
 * files from DashboardDirectory=. They need no key: the page holds no secret, and everything it shows
 * comes from the API with the key the person types in. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "gateway-static.h"
#include "gatewayd-routes.h"
#include "log.h"

/* No script but the dashboard's own files (no inline script, no eval); styles may be inline because the
 * terminal library sizes its character grid with a <style> element it writes; the API and the takeover
 * WebSocket on this origin only; no framing (clickjacking of the takeover terminal). */
#define DASHBOARD_CSP                                                                                       \
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "   \
        "font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static void add_security_headers(struct MHD_Response *resp) {
        if (!resp)
                return;
        (void) MHD_add_response_header(resp, "Content-Security-Policy", DASHBOARD_CSP);
        (void) MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
        (void) MHD_add_response_header(resp, "X-Frame-Options", "DENY");
        (void) MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
}

static void reply_static_error(Request *r, unsigned status, const char *code, const char *message) {
        req_reply_error(r, status, code, "%s", message);
        add_security_headers(r->response);
}

static int reply_static(Request *r, const char *name) {
        const char *dir = r->manager->config.dashboard_dir;
        _cleanup_close_ int fd = -EBADF;
        struct MHD_Response *resp;
        char etag[STATIC_ETAG_MAX];
        unsigned status;
        struct stat st;
        int k;

        if (!dir[0]) {
                reply_static_error(r, 404, "not_found", "The dashboard is turned off (DashboardDirectory=no).");
                return 0;
        }
        k = static_open(dir, name, &fd, &st);
        if (k == -EACCES) {
                log_msg(LOG_WARNING, "Cannot read the dashboard's %s/%s: %s", dir, name, strerror(-k));
                reply_static_error(r, 500, "internal", "The gateway cannot read this dashboard file.");
                return 0;
        }
        if (k < 0) {
                req_reply_error(r, 404, "not_found", "No route %s %s.", r->method, r->path);
                add_security_headers(r->response);
                return 0;
        }

        static_etag(&st, etag);
        if (static_etag_matches(req_header(r, MHD_HTTP_HEADER_IF_NONE_MATCH), etag)) {
                resp = MHD_create_response_from_buffer(0, (void *) "", MHD_RESPMEM_PERSISTENT);
                status = 304;
        } else {
                /* MHD reads the file as it sends it, and closes it */
                resp = MHD_create_response_from_fd64((uint64_t) st.st_size, fd);
                if (resp) {
                        TAKE_FD(fd);
                        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                                       static_content_type(name));
                }
                status = 200;
        }
        if (!resp)
                return -ENOMEM;
        /* Revalidated on every use (by the ETag): an upgraded gateway's page is never mixed with the old
         * page's scripts, and an unchanged file costs a 304. */
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
        add_security_headers(resp);
        req_reply_response(r, status, resp);
        return 0;
}

int route_dashboard_index(Request *r) {
        return reply_static(r, "index.html");
}

int route_dashboard_file(Request *r) {
        return reply_static(r, req_param(r, 0));
}
