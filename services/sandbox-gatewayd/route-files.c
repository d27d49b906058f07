/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* PUT/GET …/files?path=: the body's bytes into sandboxd's WriteFile, ReadFile's bytes as the answer. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gatewayd-routes.h"
#include "ini-util.h"

/* "true"/"false" (also 1/0); absent is false. Returns 0/1, or -EINVAL. */
static int query_bool(Request *r, const char *name) {
        const char *v = req_query(r, name);

        if (!v)
                return 0;
        if (streq(v, "true") || streq(v, "1"))
                return 1;
        if (streq(v, "false") || streq(v, "0"))
                return 0;
        return -EINVAL;
}

typedef struct FileOp {
        char *path; /* copied: a queued call is built after the request's query may be gone */
        uint32_t mode;
        int create_dirs, append;
        uint64_t offset, length;
        bool has_offset, has_length;
} FileOp;

static void file_op_free(void *p) {
        FileOp *op = p;
        if (op)
                free(op->path);
        free(op);
}

static int build_write(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        FileOp *op = r->data;
        int k;

        k = sd_bus_message_append(m, "ss", req_param(r, 0), op->path);
        if (k >= 0)
                k = sd_bus_message_append_array(m, 'y', r->body ?: "", r->body_size);
        if (k >= 0)
                k = sd_bus_message_append(m, "a{sv}", 6, "mode", "u", op->mode, "create_dirs", "b", op->create_dirs,
                                          "append", "b", op->append, "account_id", "s", r->account_id,
                                          "request_id", "s", r->request_id, "source", "s", "agent");
        return k;
}

static void on_written(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        req_reply_empty(r, 204);
}

static int file_op_start(Request *r, FileOp **ret) {
        const char *path = req_query(r, "path");
        FileOp *op;

        if (isempty(path)) {
                req_reply_error(r, 400, "invalid_request", "The query parameter 'path' is required.");
                return -EINVAL;
        }
        op = calloc(1, sizeof(FileOp));
        if (!op)
                return -ENOMEM;
        op->path = strdup(path);
        if (!op->path) {
                free(op);
                return -ENOMEM;
        }
        r->data = op;
        r->data_free = file_op_free;
        *ret = op;
        return 0;
}

int route_file_put(Request *r) {
        const char *mode;
        FileOp *op;
        int k;

        k = file_op_start(r, &op);
        if (k == -EINVAL)
                return 0;
        if (k < 0)
                return k;
        op->mode = 0644;
        mode = req_query(r, "mode");
        if (mode) {
                char *end;
                unsigned long v;
                errno = 0;
                v = strtoul(mode, &end, 8);
                if (!*mode || *end || errno != 0 || v > 0777 || mode[0] == '-' || mode[0] == '+' || mode[0] == ' ') {
                        req_reply_error(r, 400, "invalid_request",
                                        "The query parameter 'mode' must be octal from 0 to 0777, not '%s'.", mode);
                        return 0;
                }
                op->mode = (uint32_t) v;
        }
        op->create_dirs = query_bool(r, "create_dirs");
        op->append = query_bool(r, "append");
        if (op->create_dirs < 0 || op->append < 0) {
                req_reply_error(r, 400, "invalid_request",
                                "The query parameters 'create_dirs' and 'append' are true or false.");
                return 0;
        }
        return req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "WriteFile",
                        build_write, on_written, 0);
}

static int build_read(sd_bus_message *m, void *userdata) {
        Request *r = userdata;
        FileOp *op = r->data;
        int k;

        k = sd_bus_message_append(m, "ss", req_param(r, 0), op->path);
        if (k < 0)
                return k;
        k = sd_bus_message_open_container(m, 'a', "{sv}");
        if (k >= 0 && op->has_offset)
                k = sd_bus_message_append(m, "{sv}", "offset", "t", op->offset);
        if (k >= 0 && op->has_length)
                k = sd_bus_message_append(m, "{sv}", "length", "t", op->length);
        if (k >= 0)
                k = sd_bus_message_append(m, "{sv}{sv}{sv}", "account_id", "s", r->account_id, "request_id", "s",
                                          r->request_id, "source", "s", "agent");
        if (k >= 0)
                k = sd_bus_message_close_container(m);
        return k;
}

static void on_read(Request *r, sd_bus_message *reply, const sd_bus_error *error) {
        const void *data = NULL;
        size_t size = 0;
        int k;

        if (sd_bus_error_is_set(error))
                return req_reply_bus_error(r, error);
        k = sd_bus_message_read_array(reply, 'y', &data, &size);
        if (k < 0)
                return req_reply_errno(r, k);
        req_reply_data(r, 200, "application/octet-stream", data ?: "", size);
}

int route_file_get(Request *r) {
        const char *v;
        FileOp *op;
        int k;

        k = file_op_start(r, &op);
        if (k == -EINVAL)
                return 0;
        if (k < 0)
                return k;
        if ((v = req_query(r, "offset"))) {
                if (parse_decimal(v, &op->offset) < 0) {
                        req_reply_error(r, 400, "invalid_request", "The query parameter 'offset' must be a number.");
                        return 0;
                }
                op->has_offset = true;
        }
        if ((v = req_query(r, "length"))) {
                if (parse_decimal(v, &op->length) < 0) {
                        req_reply_error(r, 400, "invalid_request", "The query parameter 'length' must be a number.");
                        return 0;
                }
                op->has_length = true;
        }
        return req_call(r, SANDBOXD_BUS_NAME, SANDBOXD_BUS_PATH, SANDBOXD_MANAGER_INTERFACE, "ReadFile",
                        build_read, on_read, 0);
}
