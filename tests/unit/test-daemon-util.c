/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for daemon-util: the common options, the state directory, the signal mask, the loop's signals. */
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>

#include "daemon-util.h"
#include "macro.h"
#include "test-util.h"

static int check_listen(const char *value) {
        return streq(value, "127.0.0.1:1") ? 0 : -EINVAL;
}

/* Parses argv (NULL-terminated) into a fresh o with the defaults "c" and "d". */
static int parse(DaemonOptions *o, bool listen, char **argv) {
        int argc = 0;

        while (argv[argc])
                argc++;
        *o = (DaemonOptions) {
                .name = "test-daemon",
                .help = "test-daemon [OPTIONS...]\n",
                .config = "c",
                .config_dir = "d",
                .check_listen = listen ? check_listen : NULL,
        };
        optind = 0; /* getopt starts over */
        return daemon_parse_argv(o, argc, argv);
}

static int on_stop(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        return 0;
}

int main(void) {
        DaemonOptions o;
        sigset_t mask;

        CHECK_INT(parse(&o, false, (char *[]) { (char *) "x", NULL }), 1);
        CHECK_STR(o.config, "c");
        CHECK_STR(o.config_dir, "d");
        CHECK(!o.listen);
        CHECK_INT(parse(&o, false, (char *[]) { (char *) "x", (char *) "--config=/a", (char *) "--config-dir",
                                                (char *) "/b", NULL }), 1);
        CHECK_STR(o.config, "/a");
        CHECK_STR(o.config_dir, "/b");
        CHECK_INT(parse(&o, false, (char *[]) { (char *) "x", (char *) "--version", NULL }), 0);
        CHECK_INT(parse(&o, false, (char *[]) { (char *) "x", (char *) "-h", NULL }), 0);
        /* bad usage: an argument, an unknown option, a missing value */
        CHECK_INT(parse(&o, false, (char *[]) { (char *) "x", (char *) "more", NULL }), -EINVAL);
        CHECK_INT(parse(&o, false, (char *[]) { (char *) "x", (char *) "--bogus", NULL }), -EINVAL);
        CHECK_INT(parse(&o, false, (char *[]) { (char *) "x", (char *) "--config", NULL }), -EINVAL);
        /* --listen= only where the daemon has it, and only a value it accepts */
        CHECK_INT(parse(&o, false, (char *[]) { (char *) "x", (char *) "--listen=127.0.0.1:1", NULL }),
                  -EINVAL);
        CHECK_INT(parse(&o, true, (char *[]) { (char *) "x", (char *) "--listen=127.0.0.1:1", NULL }), 1);
        CHECK_STR(o.listen, "127.0.0.1:1");
        CHECK_INT(parse(&o, true, (char *[]) { (char *) "x", (char *) "--listen=nowhere", NULL }), -EINVAL);
        CHECK(!o.listen);

        /* the state directory: the first of $STATE_DIRECTORY's, or the fallback */
        char *dir = NULL;
        CHECK(unsetenv("STATE_DIRECTORY") == 0);
        CHECK_INT(daemon_state_dir("/var/lib/x", &dir), 0);
        CHECK_STR(dir, "/var/lib/x");
        free(dir);
        CHECK(setenv("STATE_DIRECTORY", "/var/lib/a:/var/lib/b", 1) == 0);
        CHECK_INT(daemon_state_dir("/var/lib/x", &dir), 0);
        CHECK_STR(dir, "/var/lib/a");
        free(dir);
        CHECK(setenv("STATE_DIRECTORY", "/var/lib/only", 1) == 0);
        CHECK_INT(daemon_state_dir("/var/lib/x", &dir), 0);
        CHECK_STR(dir, "/var/lib/only");
        free(dir);

        /* SIGTERM, SIGINT and the extra ones blocked, SIGPIPE ignored */
        CHECK_INT(daemon_block_signals(SIGCHLD, SIGHUP, 0), 0);
        CHECK(sigprocmask(SIG_BLOCK, NULL, &mask) == 0);
        CHECK(sigismember(&mask, SIGTERM) == 1);
        CHECK(sigismember(&mask, SIGINT) == 1);
        CHECK(sigismember(&mask, SIGCHLD) == 1);
        CHECK(sigismember(&mask, SIGHUP) == 1);
        CHECK(sigismember(&mask, SIGUSR1) == 0);
        struct sigaction sa;
        CHECK(sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN);

        /* the loop with a source for each stop signal */
        sd_event *event = NULL;
        sd_event_source *sigterm = NULL, *sigint = NULL;
        CHECK_INT(daemon_event_new(on_stop, NULL, &event, &sigterm, &sigint), 0);
        CHECK(event && sigterm && sigint);
        CHECK_INT(sd_event_source_get_signal(sigterm), SIGTERM);
        CHECK_INT(sd_event_source_get_signal(sigint), SIGINT);
        sd_event_source_disable_unref(sigterm);
        sd_event_source_disable_unref(sigint);
        sd_event_unref(event);
        return test_finish("test-daemon-util");
}
