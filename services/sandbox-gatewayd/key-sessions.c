/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Long-lived connections bound to the API key that opened them, ended when that key is revoked or expires.
 *
 * A key is checked when a request starts; SSE streams and takeover WebSockets then live for as long as
 * their clients like, so each registers here. A revocation through this process checks them at once;
 * for one through another gateway process sharing keys.db, and for expiry, a timer runs while any are
 * open: every KEY_CHECK_INTERVAL_USEC it compares each key's copied expiry with the clock and, when
 * SQLite's data_version says another connection committed something (with KeyStore=postgresql://…: when the
 * number of revoked keys changed, whichever host's gateway revoked one), re-reads the keys from the store. */
#include "key-sessions.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "time-util.h"

struct KeySession {
        Manager *manager;
        char *key_id;
        uint64_t expires_at, revoked_at;
        key_session_end_t end;
        void *userdata;
        bool linked;
        KeySession *prev, *next;
};

static void session_unlink(KeySession *s) {
        Manager *m = s->manager;

        if (!s->linked)
                return;
        if (s->prev)
                s->prev->next = s->next;
        else
                m->key_sessions = s->next;
        if (s->next)
                s->next->prev = s->prev;
        s->prev = s->next = NULL;
        s->linked = false;
}

const char *key_session_end_reason(int why) {
        return why == -EKEYEXPIRED ? "API key expired" : "API key revoked";
}

const char *key_session_end_message(int why) {
        return why == -EKEYEXPIRED ? "The API key has expired." : "The API key has been revoked.";
}

/* Re-reads the key of s from the store. An unknown key (the database replaced under us) counts as
 * revoked; a store that cannot be read leaves the copy as it was, and the next check tries again. */
static void session_reread(KeySession *s, uint64_t now) {
        _cleanup_(api_key_freep) ApiKey *k = NULL;
        int r;

        r = key_store_get(s->manager->keys, s->key_id, &k);
        if (r == -ENOENT) {
                s->revoked_at = now ?: 1;
                return;
        }
        if (r < 0) {
                log_msg(LOG_WARNING, "Cannot re-read API key %s: %s", s->key_id, strerror(-r));
                return;
        }
        s->revoked_at = k->revoked_at;
        s->expires_at = k->expires_at;
}

static int session_state(const KeySession *s, uint64_t now) {
        if (s->revoked_at > 0)
                return -EKEYREVOKED;
        if (s->expires_at > 0 && now >= s->expires_at)
                return -EKEYEXPIRED;
        return 0;
}

static void sessions_check(Manager *m, bool reread) {
        uint64_t now = now_usec(CLOCK_REALTIME);
        KeySession *s;

        if (reread)
                for (s = m->key_sessions; s; s = s->next)
                        session_reread(s, now);

        /* An end callback may free other sessions (a closed WebSocket frees its request): start over
         * after each one. Ended sessions are unlinked first, so this ends. */
        for (;;) {
                int why = 0;

                for (s = m->key_sessions; s; s = s->next)
                        if ((why = session_state(s, now)) < 0)
                                break;
                if (!s)
                        break;
                session_unlink(s);
                log_msg(LOG_INFO, "Ending a stream of API key %s: %s.", s->key_id,
                        key_session_end_reason(why));
                s->end(s->userdata, why);
        }
}

static int on_key_check(sd_event_source *es, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        bool reread = true;
        uint64_t v;
        int r;

        if (!m->key_sessions)
                return 0; /* off until the next session; key_session_add() re-arms it */
        r = key_store_data_version(m->keys, &v);
        if (r >= 0) {
                reread = !m->key_data_version_known || v != m->key_data_version;
                m->key_data_version = v;
                m->key_data_version_known = true;
        } else if (r == -KEY_STORE_UNAVAILABLE)
                reread = false; /* the shared store is away: keep the copies (expiry still counts), try later */
        sessions_check(m, reread);
        if (m->key_sessions) {
                (void) sd_event_source_set_time_relative(es, KEY_CHECK_INTERVAL_USEC);
                (void) sd_event_source_set_enabled(es, SD_EVENT_ONESHOT);
        }
        return 0;
}

static int timer_arm(Manager *m) {
        int enabled = SD_EVENT_OFF, r;

        if (!m->event)
                return 0; /* unit tests without a loop */
        if (!m->key_check) {
                r = sd_event_add_time_relative(m->event, &m->key_check, CLOCK_MONOTONIC,
                                               KEY_CHECK_INTERVAL_USEC, 0, on_key_check, m);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_description(m->key_check, "key-check");
                return 0;
        }
        if (sd_event_source_get_enabled(m->key_check, &enabled) >= 0 && enabled != SD_EVENT_OFF)
                return 0;
        r = sd_event_source_set_time_relative(m->key_check, KEY_CHECK_INTERVAL_USEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(m->key_check, SD_EVENT_ONESHOT);
        return r;
}

int key_session_add(Manager *m, const ApiKey *k, key_session_end_t end, void *userdata, KeySession **ret) {
        KeySession *s;
        int r;

        if (!m || !k || !k->id || !end || !ret)
                return -EINVAL;
        s = calloc(1, sizeof(KeySession));
        if (!s)
                return -ENOMEM;
        s->key_id = strdup(k->id);
        if (!s->key_id) {
                free(s);
                return -ENOMEM;
        }
        s->manager = m;
        s->expires_at = k->expires_at;
        s->revoked_at = k->revoked_at;
        s->end = end;
        s->userdata = userdata;
        r = timer_arm(m);
        if (r < 0) {
                free(s->key_id);
                free(s);
                return r;
        }
        s->next = m->key_sessions;
        if (s->next)
                s->next->prev = s;
        m->key_sessions = s;
        s->linked = true;
        *ret = s;
        return 0;
}

KeySession *key_session_free(KeySession *s) {
        if (!s)
                return NULL;
        session_unlink(s);
        free(s->key_id);
        free(s);
        return NULL;
}

void key_sessions_check(Manager *m) {
        if (m->key_sessions)
                sessions_check(m, true);
}

void key_sessions_free_all(Manager *m) {
        /* The sessions are their owners' to free: only let go of them here. */
        while (m->key_sessions)
                session_unlink(m->key_sessions);
        m->key_check = sd_event_source_disable_unref(m->key_check);
}
