/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Long-lived connections bound to the API key that opened them, ended when that key is revoked or expires. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "gateway-auth.h"
#include "gatewayd-manager.h"

/* How often open sessions' keys are checked against the key store (only while any are open): a key
 * revoked by another gateway process sharing keys.db, or one that expires, ends them within this, well
 * under the second the contract promises. */
#define KEY_CHECK_INTERVAL_USEC (250 * USEC_PER_MSEC)

typedef struct KeySession KeySession;

/* Called once, when the session's key is no longer active: why is -EKEYREVOKED or -EKEYEXPIRED. The
 * session is already unlinked when it runs; its owner still frees it. */
typedef void (*key_session_end_t)(void *userdata, int why);

/* Binds a connection to key k (its id and expiry are copied). A key that is not active any more ends
 * it at the next check. */
int key_session_add(Manager *m, const ApiKey *k, key_session_end_t end, void *userdata, KeySession **ret);
KeySession *key_session_free(KeySession *s);

/* Checks every open session's key against the store now (after a revocation in this process, which
 * SQLite's data_version does not show to the handle that made it). */
void key_sessions_check(Manager *m);
/* Unlinks every session (their owners free them) and stops the timer. */
void key_sessions_free_all(Manager *m);

/* Why a session ended: short, for close frames ("API key revoked"), and as a sentence for error bodies. */
const char *key_session_end_reason(int why);
const char *key_session_end_message(int why);
