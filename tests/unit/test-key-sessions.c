/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for key-sessions: streams end when their key is revoked (here or elsewhere) or expires. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gatewayd-manager.h"
#include "key-sessions.h"
#include "key-store.h"
#include "macro.h"
#include "test-util.h"
#include "time-util.h"

static char tmpdir[] = "/tmp/test-key-sessions.XXXXXX";

typedef struct Stream {
        KeySession *session;
        int why;   /* how it was ended, 0 while open */
        int ended; /* how many times */
        struct Stream *also_free; /* a stream whose owner goes with this one (a closed WebSocket's request) */
} Stream;

static void on_end(void *userdata, int why) {
        Stream *s = userdata;

        s->why = why;
        s->ended++;
        if (s->also_free)
                s->also_free->session = key_session_free(s->also_free->session);
}

static KeyStore *open_store(void) {
        char path[512];
        KeyStore *s = NULL;

        snprintf(path, sizeof(path), "%s/keys.db", tmpdir);
        if (key_store_open(path, &s) < 0) {
                fprintf(stderr, "key_store_open failed\n");
                exit(EXIT_FAILURE);
        }
        return s;
}

static ApiKey *mint(KeyStore *s, uint64_t now, uint64_t ttl_usec) {
        _cleanup_free_ char *error = NULL, *secret = NULL;
        ApiKey *k = NULL;

        KeySpec spec = { .preset = "admin", .ttl_usec = ttl_usec };

        CHECK_INT(key_store_create(s, &spec, NULL, "root", now, &secret, &k, &error), 0);
        if (!k)
                exit(EXIT_FAILURE);
        return k;
}

/* Without an event loop: only explicit checks (a revocation through this process). */
static void test_revoked_here_and_expired(void) {
        _cleanup_(key_store_freep) KeyStore *store = open_store();
        uint64_t now = now_usec(CLOCK_REALTIME);
        _cleanup_(api_key_freep) ApiKey *a = mint(store, now, 0), *b = mint(store, now, 0),
                                        *old = mint(store, now - 10 * USEC_PER_SEC, USEC_PER_SEC);
        Manager m = { .keys = store };
        Stream s1 = {}, s2 = {}, s3 = {}, s4 = {};

        CHECK_INT(key_session_add(&m, a, on_end, &s1, &s1.session), 0);
        CHECK_INT(key_session_add(&m, a, on_end, &s2, &s2.session), 0);
        CHECK_INT(key_session_add(&m, b, on_end, &s3, &s3.session), 0);
        CHECK_INT(key_session_add(&m, old, on_end, &s4, &s4.session), 0);
        CHECK_INT(key_session_add(&m, NULL, on_end, &s4, &s4.session), -EINVAL);

        /* Nothing changed but the clock: only the expired key's stream ends. */
        key_sessions_check(&m);
        CHECK_INT(s4.ended, 1);
        CHECK_INT(s4.why, -EKEYEXPIRED);
        CHECK_INT(s1.ended + s2.ended + s3.ended, 0);

        /* Both streams of a revoked key end, once; the other key's does not. */
        CHECK_INT(key_store_revoke(store, a->id, now), 0);
        key_sessions_check(&m);
        key_sessions_check(&m);
        CHECK_INT(s1.ended, 1);
        CHECK_INT(s2.ended, 1);
        CHECK_INT(s1.why, -EKEYREVOKED);
        CHECK_INT(s3.ended, 0);
        CHECK_INT(s4.ended, 1);
        CHECK(streq(key_session_end_reason(-EKEYREVOKED), "API key revoked"));
        CHECK(streq(key_session_end_reason(-EKEYEXPIRED), "API key expired"));

        /* Owners free their sessions, ended or not. */
        key_session_free(s1.session);
        key_session_free(s2.session);
        key_session_free(s3.session);
        key_session_free(s4.session);
        CHECK(!m.key_sessions);
}

/* An end callback that frees another session of the same key does not trip the walk. */
static void test_end_frees_another(void) {
        _cleanup_(key_store_freep) KeyStore *store = open_store();
        uint64_t now = now_usec(CLOCK_REALTIME);
        _cleanup_(api_key_freep) ApiKey *a = mint(store, now, 0);
        Manager m = { .keys = store };
        Stream s1 = {}, s2 = {}, s3 = {};

        CHECK_INT(key_session_add(&m, a, on_end, &s1, &s1.session), 0);
        CHECK_INT(key_session_add(&m, a, on_end, &s2, &s2.session), 0);
        CHECK_INT(key_session_add(&m, a, on_end, &s3, &s3.session), 0);
        s3.also_free = &s2; /* s3 is first in the list */
        CHECK_INT(key_store_revoke(store, a->id, now), 0);
        key_sessions_check(&m);
        CHECK_INT(s3.ended, 1);
        CHECK_INT(s2.ended, 0);
        CHECK(!s2.session);
        CHECK_INT(s1.ended, 1);
        key_session_free(s1.session);
        key_session_free(s3.session);
        CHECK(!m.key_sessions);
}

static int on_deadline(sd_event_source *es, uint64_t usec, void *userdata) {
        return sd_event_exit(sd_event_source_get_event(es), 0);
}

/* With the loop: a revocation through another handle on the same file (another gateway process) and
 * an expiry both end their streams within the second the contract promises, with nothing called. */
static void test_timer_sees_other_process(void) {
        _cleanup_(key_store_freep) KeyStore *store = open_store(), *other = open_store();
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        uint64_t now = now_usec(CLOCK_REALTIME), t0, t1;
        _cleanup_(api_key_freep) ApiKey *a = mint(store, now, 0), *b = mint(store, now, 0),
                                        *soon = mint(store, now, 600 * USEC_PER_MSEC);
        Manager m = { .keys = store };
        Stream s1 = {}, s2 = {}, s3 = {};
        sd_event_source *deadline = NULL;

        CHECK_INT(sd_event_default(&e), 1);
        m.event = e;
        CHECK_INT(key_session_add(&m, a, on_end, &s1, &s1.session), 0);
        CHECK_INT(key_session_add(&m, b, on_end, &s2, &s2.session), 0);
        CHECK_INT(key_session_add(&m, soon, on_end, &s3, &s3.session), 0);
        CHECK(m.key_check);

        CHECK_INT(key_store_revoke(other, a->id, now_usec(CLOCK_REALTIME)), 0);
        t0 = now_usec(CLOCK_MONOTONIC);
        while (s1.ended == 0 && now_usec(CLOCK_MONOTONIC) - t0 < 5 * USEC_PER_SEC)
                CHECK(sd_event_run(e, 100 * USEC_PER_MSEC) >= 0);
        t1 = now_usec(CLOCK_MONOTONIC);
        CHECK_INT(s1.ended, 1);
        CHECK_INT(s1.why, -EKEYREVOKED);
        CHECK(t1 - t0 < USEC_PER_SEC);
        fprintf(stderr, "revocation through another handle seen after %" PRIu64 " ms\n",
                (t1 - t0) / USEC_PER_MSEC);

        while (s3.ended == 0 && now_usec(CLOCK_MONOTONIC) - t0 < 5 * USEC_PER_SEC)
                CHECK(sd_event_run(e, 100 * USEC_PER_MSEC) >= 0);
        CHECK_INT(s3.ended, 1);
        CHECK_INT(s3.why, -EKEYEXPIRED);
        CHECK(now_usec(CLOCK_REALTIME) < soon->expires_at + USEC_PER_SEC);
        CHECK_INT(s2.ended, 0);

        /* The last session gone, the timer stops: a loop with nothing else to do stays idle. */
        s2.session = key_session_free(s2.session);
        CHECK_INT(sd_event_add_time_relative(e, &deadline, CLOCK_MONOTONIC, 600 * USEC_PER_MSEC, 0,
                                             on_deadline, NULL),
                  0);
        CHECK_INT(sd_event_loop(e), 0);
        int enabled = -1;
        CHECK_INT(sd_event_source_get_enabled(m.key_check, &enabled), 0);
        CHECK_INT(enabled, SD_EVENT_OFF);

        key_session_free(s1.session);
        key_session_free(s3.session);
        sd_event_source_unref(deadline);
        key_sessions_free_all(&m);
}

int main(void) {
        test_mkdtemp(tmpdir);

        test_revoked_here_and_expired();
        test_end_frees_another();
        test_timer_sees_other_process();

        test_rm_rf(tmpdir);
        return test_finish("test-key-sessions");
}
