/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxd-image-helper: one image job (import or build), run by sandboxd in a process group of its own.
 *
 *   sandboxd-image-helper import tar|oci-archive|docker-archive TAG JOBDIR   (the stream on stdin)
 *   sandboxd-image-helper build SUITE VARIANT PACKAGES JOBDIR               (PACKAGES: a,b,c or "")
 *
 * It makes JOBDIR/tree and reports on stdout, one line each: "progress PHASE DONE TOTAL", then
 * "done SIZE DIGEST DEVICES SETID OWNERS" or "error MESSAGE" (exit status 1). sandboxd writes the
 * metadata and moves JOBDIR into place; whatever this leaves behind on failure, sandboxd removes. It runs
 * in a transient service (sandbox-image-<job>.service), which systemd stops as a whole; every process it
 * starts also dies with it (PR_SET_PDEATHSIG). */
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "image-store.h"
#include "image-unpack.h"
#include "macro.h"
#include "namespace.h"

static const char *phase = "start";

static void report(const char *fmt, ...) _printf_(1, 2);
static void report(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
        fflush(stdout);
}

static _noreturn_ void die(const char *fmt, ...) _printf_(1, 2);
static _noreturn_ void die(const char *fmt, ...) {
        va_list ap;
        char m[1024];
        va_start(ap, fmt);
        vsnprintf(m, sizeof(m), fmt, ap);
        va_end(ap);
        for (char *p = m; *p; p++)
                if (*p == '\n')
                        *p = ' ';
        report("error %s", m);
        exit(EXIT_FAILURE);
}

static void on_progress(uint64_t done, uint64_t total, void *userdata) {
        report("progress %s %llu %llu", phase, (unsigned long long) done, (unsigned long long) total);
}

static void set_phase(const char *p) {
        phase = p;
        report("progress %s 0 0", p);
}

/* Runs argv (PATH searched) with stdout and stderr to ours' stderr, or stderr lines as phases. */
static void run(char *const argv[], bool phases_from_stderr) {
        int pipefd[2] = { -1, -1 };
        pid_t pid;
        int status;

        if (phases_from_stderr && pipe2(pipefd, O_CLOEXEC) < 0)
                die("pipe: %s", strerror(errno));
        pid = fork();
        if (pid < 0)
                die("fork: %s", strerror(errno));
        if (pid == 0) {
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() == 1)
                        _exit(EXIT_FAILURE);
                int err = pipefd[1] >= 0 ? pipefd[1] : STDERR_FILENO;
                if (dup2(err, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0)
                        _exit(EXIT_FAILURE);
                int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (null >= 0)
                        (void) dup2(null, STDIN_FILENO);
                execvp(argv[0], argv);
                _exit(127);
        }
        if (phases_from_stderr) {
                char line[512];
                close(pipefd[1]);
                FILE *f = fdopen(pipefd[0], "r");
                while (f && fgets(line, sizeof(line), f)) {
                        line[strcspn(line, "\n")] = 0;
                        fprintf(stderr, "%s\n", line);
                        /* mmdebstrap's "I: ..." lines say where it is */
                        if (strncmp(line, "I: ", 3) == 0) {
                                for (char *p = line; *p; p++)
                                        if (*p == ' ')
                                                *p = '_';
                                report("progress %.120s 0 0", line + 3);
                        }
                }
                if (f)
                        fclose(f);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        die("waitpid: %s", strerror(errno));
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                die("%s failed (%s %d)", argv[0], WIFEXITED(status) ? "exit status" : "signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

static void unpack(int fd, const char *dir, ImageUnpack *u) {
        _cleanup_free_ char *error = NULL;

        if (mkdir(dir, 0755) < 0)
                die("mkdir %s: %s", dir, strerror(errno));
        u->progress = on_progress;
        int r = image_unpack(fd, dir, u, &error);
        if (r < 0)
                die("%s", error ?: strerror(-r));
        if (chdir("/") < 0)
                die("chdir: %s", strerror(errno));
}

/* Copies stdin to path, hashing it. */
static void save_stream(const char *path, char digest[static IMAGE_DIGEST_SIZE]) {
        _cleanup_close_ int out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        gnutls_hash_hd_t h;
        unsigned char sum[32];
        uint64_t done = 0;
        char buf[64 * 1024];

        if (out < 0)
                die("create %s: %s", path, strerror(errno));
        if (gnutls_hash_init(&h, GNUTLS_DIG_SHA256) < 0)
                die("sha256: out of memory");
        for (;;) {
                ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        die("read: %s", strerror(errno));
                if (n == 0)
                        break;
                (void) gnutls_hash(h, buf, (size_t) n);
                if (write(out, buf, (size_t) n) != n)
                        die("write %s: %s", path, errno == ENOSPC ? "no space left on the device" : strerror(errno));
                done += (uint64_t) n;
                if (done % (4u << 20) < (uint64_t) n)
                        on_progress(done, 0, NULL);
        }
        gnutls_hash_deinit(h, sum);
        memcpy(digest, "sha256:", 7);
        for (size_t i = 0; i < sizeof(sum); i++)
                snprintf(digest + 7 + 2 * i, 3, "%02x", sum[i]);
}

static void finish(const char *tree, const char *digest, uint64_t devices, uint64_t setid) {
        ImageHygiene h;

        set_phase("sanitize");
        int r = image_tree_sanitize(tree, &h);
        if (r < 0)
                die("sanitizing the tree: %s", strerror(-r));
        report("done %llu %s %llu %llu %llu", (unsigned long long) h.size, digest,
               (unsigned long long) (devices + h.devices_dropped), (unsigned long long) (setid + h.setid_stripped),
               (unsigned long long) h.owners_reset);
}

int main(int argc, char *argv[]) {
        char tree[4096], layout[4096], file[4096], ref[4200];
        ImageUnpack u = {};

        /* It runs as a transient service of its own (image-dbus.c): should sandboxd die, the next one stops
         * the service and removes the job's directory; until then a write to the gone pipe ends it. */
        setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin", 1);
        umask(022);

        if (argc == 5 && streq(argv[1], "import")) {
                const char *format = argv[2], *tag = argv[3], *dir = argv[4];
                snprintf(tree, sizeof(tree), "%s/" IMAGE_TREE_NAME, dir);
                snprintf(layout, sizeof(layout), "%s/layout", dir);
                if (streq(format, "tar")) {
                        set_phase("unpack");
                        unpack(STDIN_FILENO, tree, &u);
                } else if (streq(format, "oci-archive")) {
                        set_phase("unpack-layout");
                        unpack(STDIN_FILENO, layout, &u);
                        set_phase("umoci");
                        snprintf(ref, sizeof(ref), "%s:%s", layout, tag);
                        run((char *[]) { (char *) "umoci", (char *) "raw", (char *) "unpack", (char *) "--image", ref,
                                         tree, NULL },
                            false);
                } else if (streq(format, "docker-archive")) {
                        set_phase("receive");
                        snprintf(file, sizeof(file), "%s/archive.tar", dir);
                        save_stream(file, u.digest);
                        set_phase("skopeo");
                        snprintf(ref, sizeof(ref), "docker-archive:%s", file);
                        char dst[4200];
                        snprintf(dst, sizeof(dst), "oci:%s:image", layout);
                        run((char *[]) { (char *) "skopeo", (char *) "--insecure-policy", (char *) "copy",
                                         (char *) "--quiet", ref, dst, NULL },
                            false);
                        (void) unlink(file);
                        set_phase("umoci");
                        snprintf(ref, sizeof(ref), "%s:image", layout);
                        run((char *[]) { (char *) "umoci", (char *) "raw", (char *) "unpack", (char *) "--image", ref,
                                         tree, NULL },
                            false);
                } else
                        die("unknown format '%s'", format);
                (void) namespace_remove_workspace(layout);
                finish(tree, u.digest, u.devices_dropped, u.setid_stripped);
                return EXIT_SUCCESS;
        }
        if (argc == 6 && streq(argv[1], "build")) {
                const char *suite = argv[2], *variant = argv[3], *packages = argv[4], *dir = argv[5];
                char variant_arg[128], include_arg[4096];
                snprintf(tree, sizeof(tree), "%s/" IMAGE_TREE_NAME, dir);
                snprintf(file, sizeof(file), "%s/build.tar", dir);
                snprintf(variant_arg, sizeof(variant_arg), "--variant=%s", variant);
                snprintf(include_arg, sizeof(include_arg), "--include=%s", packages);
                set_phase("mmdebstrap");
                char *cmd[8];
                size_t n = 0;
                cmd[n++] = (char *) "mmdebstrap";
                cmd[n++] = (char *) "--mode=root";
                cmd[n++] = variant_arg;
                if (!isempty(packages))
                        cmd[n++] = include_arg;
                cmd[n++] = (char *) suite;
                cmd[n++] = file;
                cmd[n] = NULL;
                run(cmd, true);
                _cleanup_close_ int fd = open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        die("open %s: %s", file, strerror(errno));
                set_phase("unpack");
                unpack(fd, tree, &u);
                (void) unlink(file);
                finish(tree, u.digest, u.devices_dropped, u.setid_stripped);
                return EXIT_SUCCESS;
        }
        fprintf(stderr, "usage: %s import FORMAT TAG JOBDIR | build SUITE VARIANT PACKAGES JOBDIR\n",
                program_invocation_short_name);
        return 2;
}
