/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Bus callers' uids, asked of the bus once per connection: unique names are never reused on a bus. */
#include "sender-cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"

typedef struct SenderUid {
        uid_t uid;
        char name[];
} SenderUid;

struct SenderCache {
        Hashmap *names; /* unique name → SenderUid, whose name is the key */
        size_t max;
};

int sender_cache_new(size_t max, SenderCache **ret) {
        SenderCache *c = calloc(1, sizeof(SenderCache));

        if (!c)
                return -ENOMEM;
        c->names = hashmap_new();
        if (!c->names) {
                free(c);
                return -ENOMEM;
        }
        c->max = max;
        *ret = c;
        return 0;
}

SenderCache *sender_cache_free(SenderCache *c) {
        if (!c)
                return NULL;
        sender_cache_forget(c, NULL);
        hashmap_free(c->names);
        free(c);
        return NULL;
}

bool sender_cache_get(SenderCache *c, const char *name, uid_t *ret) {
        SenderUid *e = name ? hashmap_get(c->names, name) : NULL;

        if (!e)
                return false;
        *ret = e->uid;
        return true;
}

void sender_cache_put(SenderCache *c, const char *name, uid_t uid) {
        SenderUid *e;

        if (!name || name[0] != ':' || hashmap_get(c->names, name))
                return;
        if (hashmap_size(c->names) >= c->max)
                sender_cache_forget(c, NULL);
        e = malloc(sizeof(SenderUid) + strlen(name) + 1);
        if (!e)
                return;
        e->uid = uid;
        strcpy(e->name, name);
        if (hashmap_put(c->names, e->name, e) < 0)
                free(e);
}

void sender_cache_forget(SenderCache *c, const char *name) {
        SenderUid *e;

        if (name) {
                free(hashmap_remove(c->names, name));
                return;
        }
        HASHMAP_FOREACH(e, c->names, state) {
                (void) hashmap_remove(c->names, e->name);
                free(e);
        }
}

size_t sender_cache_size(SenderCache *c) {
        return hashmap_size(c->names);
}

int sender_cache_uid(SenderCache *c, sd_bus_message *msg, uid_t *ret) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        const char *sender = sd_bus_message_get_sender(msg);
        uid_t uid;
        int r;

        if (sender_cache_get(c, sender, ret))
                return 0;
        r = sd_bus_query_sender_creds(msg, SD_BUS_CREDS_EUID, &creds);
        if (r < 0)
                return r;
        r = sd_bus_creds_get_euid(creds, &uid);
        if (r < 0)
                return r;
        sender_cache_put(c, sender, uid);
        *ret = uid;
        return 0;
}

static int on_name_owner_changed(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        SenderCache *c = userdata;
        const char *name, *old_owner, *new_owner;

        if (sd_bus_message_read(msg, "sss", &name, &old_owner, &new_owner) < 0)
                return 0;
        /* a connection left the bus: its unique name lost its owner */
        if (name[0] == ':' && new_owner[0] == 0)
                sender_cache_forget(c, name);
        return 0;
}

int sender_cache_watch(SenderCache *c, sd_bus *bus, sd_bus_slot **ret_slot) {
        /* arg2='': only names that lost their owner */
        return sd_bus_add_match_async(bus, ret_slot,
                                      "type='signal',sender='org.freedesktop.DBus',"
                                      "path='/org/freedesktop/DBus',interface='org.freedesktop.DBus',"
                                      "member='NameOwnerChanged',arg2=''",
                                      on_name_owner_changed, NULL, c);
}
