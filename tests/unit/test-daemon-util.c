/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test for daemon-util: the common options, the state directory, the signal mask, the loop's signals,
 * daemon_main(); and log.h's log_msg_errno(). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon-util.h"
#include "log.h"
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
                .summary = "Tests.\n",
                .footer = "See nothing.\n",
                .config = "c",
                .config_dir = "d",
                .check_listen = listen ? check_listen : NULL,
        };
        optind = 0; /* getopt starts over */
        return daemon_parse_argv(o, argc, argv);
}

/* What --help printed, given argv (NULL-terminated) and whether --listen= is an option. */
static char *help_text(bool listen, char **argv) {
        static char buf[4096];
        DaemonOptions o;
        FILE *f = tmpfile();
        int saved = dup(STDOUT_FILENO);
        size_t n;

        CHECK(f && saved >= 0);
        fflush(stdout);
        CHECK(dup2(fileno(f), STDOUT_FILENO) >= 0);
        CHECK_INT(parse(&o, listen, argv), 0);
        fflush(stdout);
        CHECK(dup2(saved, STDOUT_FILENO) >= 0);
        close(saved);
        rewind(f);
        n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = 0;
        fclose(f);
        return buf;
}

static int on_stop(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        return 0;
}

/* A manager for daemon_main() that counts its calls and fails where told. */
typedef struct FakeManager {
        int new_r, startup_r, run_r;
        unsigned n_new, n_startup, n_run, n_free;
        const char *config, *listen;
} FakeManager;

static FakeManager fake;

static int fake_new(const DaemonOptions *o, FakeManager **ret, char **ret_error) {
        fake.n_new++;
        fake.config = o->config;
        fake.listen = o->listen;
        if (fake.new_r < 0) {
                *ret_error = strdup("no config for you");
                return fake.new_r;
        }
        *ret = &fake;
        return 0;
}

static int fake_startup(FakeManager *m) {
        CHECK(m == &fake);
        m->n_startup++;
        return m->startup_r;
}

static int fake_run(FakeManager *m) {
        m->n_run++;
        return m->run_r;
}

static FakeManager *fake_free(FakeManager *m) {
        CHECK(m == &fake);
        m->n_free++;
        return NULL;
}

DEFINE_DAEMON_OPS(fake_ops, FakeManager, fake_new, fake_startup, fake_run, fake_free);

/* daemon_main() with argv (NULL-terminated) and a fake manager that fails in new(), startup() or run()
 * with the given errnos; returns the exit code. */
static int run_main(char **argv, int new_r, int startup_r, int run_r) {
        DaemonOptions o = {
                .name = "test-daemon",
                .summary = "Tests.\n",
                .footer = "See nothing.\n",
                .config = "c",
                .config_dir = "d",
                .check_listen = check_listen,
                .signals = (const int[]) { SIGUSR2, 0 },
        };
        int argc = 0;

        while (argv[argc])
                argc++;
        fake = (FakeManager) { .new_r = new_r, .startup_r = startup_r, .run_r = run_r };
        optind = 0;
        return daemon_main(&o, &fake_ops, argc, argv);
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

        /* --help: the daemon's summary, the common options with the defaults (not what an earlier option
         * set), --listen= where the daemon has it, the footer */
        static const char help[] =
                "test-daemon [OPTIONS...]\n\n"
                "Tests.\n\n"
                "  -h --help            Show this help\n"
                "     --version         Show the version\n"
                "%s"
                "     --config=PATH     Configuration file (default c)\n"
                "     --config-dir=DIR  Drop-in directory (default d)\n\n"
                "See nothing.\n";
        char want[1024];
        snprintf(want, sizeof(want), help, "");
        CHECK_STR(help_text(false, (char *[]) { (char *) "x", (char *) "--config=/a", (char *) "--help", NULL }),
                  want);
        snprintf(want, sizeof(want), help,
                 "     --listen=ADDR:PORT Listen here instead of the socket from systemd or Listen=\n");
        CHECK_STR(help_text(true, (char *[]) { (char *) "x", (char *) "-h", NULL }), want);

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

        /* daemon_main(): --help and bad usage make no manager */
        CHECK_INT(run_main((char *[]) { (char *) "x", (char *) "--help", NULL }, 0, 0, 0), EXIT_SUCCESS);
        CHECK_INT(fake.n_new, 0);
        CHECK_INT(run_main((char *[]) { (char *) "x", (char *) "--bogus", NULL }, 0, 0, 0), EXIT_FAILURE);
        CHECK_INT(fake.n_new, 0);
        /* a manager that cannot be made is not started, run nor freed */
        CHECK_INT(run_main((char *[]) { (char *) "x", NULL }, -EINVAL, 0, 0), EXIT_FAILURE);
        CHECK(fake.n_new == 1 && fake.n_startup == 0 && fake.n_run == 0 && fake.n_free == 0);
        /* one that cannot start is freed without running */
        CHECK_INT(run_main((char *[]) { (char *) "x", NULL }, 0, -EIO, 0), EXIT_FAILURE);
        CHECK(fake.n_new == 1 && fake.n_startup == 1 && fake.n_run == 0 && fake.n_free == 1);
        /* the loop's end decides the exit code; the options reach new() */
        CHECK_INT(run_main((char *[]) { (char *) "x", (char *) "--config=/e",
                                        (char *) "--listen=127.0.0.1:1", NULL }, 0, 0, -ECONNRESET),
                  EXIT_FAILURE);
        CHECK(fake.n_new == 1 && fake.n_startup == 1 && fake.n_run == 1 && fake.n_free == 1);
        CHECK_STR(fake.config, "/e");
        CHECK_STR(fake.listen, "127.0.0.1:1");
        CHECK_INT(run_main((char *[]) { (char *) "x", NULL }, 0, 0, 0), EXIT_SUCCESS);
        CHECK(fake.n_run == 1 && fake.n_free == 1);
        /* and it blocked the options' signals too */
        CHECK(sigprocmask(SIG_BLOCK, NULL, &mask) == 0);
        CHECK(sigismember(&mask, SIGUSR2) == 1);

        /* log_msg_errno(): -abs(error) back, errno set for %m, whichever sign it was given */
        CHECK_INT(log_msg_errno(LOG_DEBUG, -ENOENT, "test-daemon-util: %m"), -ENOENT);
        CHECK_INT(errno, ENOENT);
        CHECK_INT(log_msg_errno(LOG_DEBUG, EIO, "test-daemon-util: %s: %m", "x"), -EIO);
        CHECK_INT(errno, EIO);

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
