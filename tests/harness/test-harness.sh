#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# test-harness.sh: self-test of sandbox-harness (parallel instances, limits inside, clean-up after
# every kind of run); prints TAP and exits non-zero on any failure.
set -uo pipefail

if [ "$(id -u)" != 0 ]; then
        echo "1..0 # SKIP the harness self-test needs root"
        exit 77
fi

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
H=${SANDBOX_HARNESS:-$HERE/sandbox-harness}
PY=/usr/bin/python3 # Debian's, present inside the instances too (the one first on PATH may not be)

# A private state dir: other harness users on this machine neither see nor collect our instances.
WORK=$(mktemp -d /run/sandboxd-harness-selftest.XXXXXX) # the state dir and our logs
STATE=$WORK/state
mkdir "$STATE"
export SANDBOX_HARNESS_STATE=$STATE
export HARNESS_QUIET=1
TAG=st$$x$RANDOM # instance names are unique to this run: cgroup names are global
MARKER=$(mktemp /tmp/sandboxd-harness-selftest-marker.XXXXXX)

N=0 PASSED=0 FAILED=0
BOOTED=()

ok() { N=$((N + 1)); PASSED=$((PASSED + 1)); echo "ok $N - $1"; }
not_ok() { # what [diagnostics...]
        N=$((N + 1))
        FAILED=$((FAILED + 1))
        echo "not ok $N - $1"
        shift
        local l
        for l in "$@"; do
                printf '%s\n' "$l" | sed 's/^/# /'
        done
}
diag() { printf '%s\n' "$@" | sed 's/^/# /'; }

finish() {
        local name p
        trap - EXIT INT TERM
        # harness runs still going (a test was interrupted): SIGKILL is one of the ways out it must
        # survive, gc below does the rest. Only what is still our child: pids get reused.
        for p in $(jobs -p); do
                [ "$(cut -d' ' -f4 "/proc/$p/stat" 2>/dev/null)" = "$$" ] && kill -KILL "$p" 2>/dev/null
        done
        for name in "${BOOTED[@]}"; do
                [ -d "$STATE/$name" ] && timeout 60 "$H" down "$name" >/dev/null 2>&1
        done
        # whatever a failed test left behind (owners are dead now): gc, then the empty state dir
        timeout 60 "$H" gc >/dev/null 2>&1
        rmdir "$STATE" 2>/dev/null || { diag "leftovers in $STATE:" "$(ls -la "$STATE")"; rm -rf --one-file-system "$STATE"; }
        rm -rf --one-file-system "$WORK"
        rm -f "$MARKER"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- helpers -------------------------------------------------------------------------------------

inst() { # name cmd... → run cmd in the instance as a transient service, bounded in time
        local name=$1
        shift
        timeout 120 "$H" exec "$name" -- "$@"
}

# Start the harness in the background with SIGINT at its default: a script's background jobs
# ignore SIGINT otherwise, and an ignored signal cannot be trapped.
spawn() { # logfile args... → sets SPAWNED to the pid
        local log=$1
        shift
        "$PY" -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$H" "$@" </dev/null >"$log" 2>&1 &
        SPAWNED=$!
}

wait_bounded() { # pid seconds → the pid's exit status (SIGKILLed, so 137, if it takes longer)
        local pid=$1 secs=$2 i st rc=0
        for i in $(seq 1 $((secs * 10))); do
                st=$(cat "/proc/$pid/stat" 2>/dev/null) || break
                st=${st##*) }
                [ "${st%% *}" = Z ] && break
                sleep 0.1
        done
        [ "${st%% *}" = Z ] || [ ! -e "/proc/$pid" ] || { diag "pid $pid still runs after $secs s: killing it"; kill -KILL "$pid"; }
        wait "$pid" || rc=$?
        return "$rc"
}

starttime() { # pid → its start time, nothing if gone
        local s
        s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
        s=${s##*) }
        set -- $s
        echo "${20}"
}

# Wait until instance NAME runs systemd and takes commands; then record what we need to prove its
# removal later: PID 1 (and start time), the launcher, and PID 1's pid namespace.
declare -A PID1 PID1START LAUNCHER LAUNCHERSTART PIDNS
wait_up() { # name [process name to wait for inside]
        local name=$1 proc=${2:-} i
        for i in $(seq 1 600); do
                if [ -s "$STATE/$name/pid1" ] && [ -s "$STATE/$name/launcher" ] &&
                        timeout 10 "$H" exec "$name" -- true >/dev/null 2>&1; then
                        break
                fi
                sleep 0.05
        done
        PID1[$name]=$(cat "$STATE/$name/pid1" 2>/dev/null)
        LAUNCHER[$name]=$(cat "$STATE/$name/launcher" 2>/dev/null)
        LAUNCHERSTART[$name]=$(cat "$STATE/$name/launcher.start" 2>/dev/null)
        [ -n "${PID1[$name]}" ] || return 1
        PID1START[$name]=$(starttime "${PID1[$name]}")
        PIDNS[$name]=$(readlink "/proc/${PID1[$name]}/ns/pid" 2>/dev/null)
        [ -n "${PIDNS[$name]}" ] && [ "$(cat "/proc/${PID1[$name]}/comm" 2>/dev/null)" = systemd ] || return 1
        if [ -n "$proc" ]; then
                for i in $(seq 1 600); do
                        timeout 10 "$H" exec "$name" -- pgrep -x "$proc" >/dev/null 2>&1 && return 0
                        sleep 0.05
                done
                return 1
        fi
        return 0
}

launcher_runs() { # name → true if the launcher we recorded is still that process and not a zombie
        local name=$1 st
        st=$(cat "/proc/${LAUNCHER[$name]}/stat" 2>/dev/null) || return 1
        grep -q '^[^)]*) Z' <<<"$st" && return 1
        [ -z "${LAUNCHERSTART[$name]:-}" ] || [ "$(starttime "${LAUNCHER[$name]}")" = "${LAUNCHERSTART[$name]}" ]
}

# Everything of instance NAME is gone: state dir, cgroups in every hierarchy, its processes, its
# mounts; and the host's /tmp still has our marker. Prints what is left; fails if anything is.
leftovers() { # name
        local name=$1 left=() p cgs
        [ -e "$STATE/$name" ] && left+=("state dir $STATE/$name")
        cgs=$(find /sys/fs/cgroup -type d -name "sandboxd-harness-$name" -prune -print 2>/dev/null)
        [ -n "$cgs" ] && left+=("cgroups: $cgs")
        if [ -n "${PID1[$name]:-}" ] && [ -n "$(starttime "${PID1[$name]}")" ] &&
                [ "$(starttime "${PID1[$name]}")" = "${PID1START[$name]}" ]; then
                left+=("PID 1 ${PID1[$name]} still runs")
        fi
        if [ -n "${PIDNS[$name]:-}" ]; then
                for p in /proc/[0-9]*; do
                        [ "$(readlink "$p/ns/pid" 2>/dev/null)" = "${PIDNS[$name]}" ] &&
                                left+=("process ${p#/proc/} in its pid namespace: $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)")
                done
        fi
        # (a detached instance's launcher is the host init's child: reaping its zombie is init's job).
        # The launcher is known by pid and start time: pid_max may be 32768 here, and a busy CI run
        # hands a reaped launcher's pid to a new process within seconds.
        if [ -n "${LAUNCHER[$name]:-}" ] && launcher_runs "$name"; then
                left+=("launcher ${LAUNCHER[$name]} still runs: $(tr '\0' ' ' <"/proc/${LAUNCHER[$name]}/cmdline" 2>/dev/null)")
        fi
        grep -F -e "$STATE/$name" /proc/self/mountinfo >/dev/null && left+=("mounts: $(grep -F "$STATE/$name" /proc/self/mountinfo)")
        grep -E ' - (overlay|tmpfs) ' /proc/self/mountinfo | grep -F -e "$name" >/dev/null &&
                left+=("overlay/tmpfs: $(grep -E ' - (overlay|tmpfs) ' /proc/self/mountinfo | grep -F "$name")")
        [ -e "$MARKER" ] || left+=("the host's /tmp lost $MARKER")
        if [ ${#left[@]} -gt 0 ]; then
                printf '%s\n' "${left[@]}"
                return 1
        fi
        return 0
}

check_clean() { # what name
        local out
        if out=$(leftovers "$2"); then ok "$1"; else not_ok "$1" "$out"; fi
}

START=$SECONDS

# systemd's own cgroups (init.scope, system.slice) must only ever appear inside our child cgroups,
# never at the top of a host hierarchy (what happens to hierarchies we do not give it a child of).
host_systemd_cgroups() {
        local d
        for d in /sys/fs/cgroup/*/ "/sys/fs/cgroup/memory$(awk -F: '$2 == "memory" { print $3 }' /proc/self/cgroup)/"; do
                ls -d "$d"init.scope "$d"system.slice 2>/dev/null
        done | sort -u
}
SYSTEMD_CGROUPS_BEFORE=$(host_systemd_cgroups)

# --- a. two instances at once, each with its own hostname and loopback -----------------------------

A=${TAG}a B=${TAG}b
BOOTED+=("$A" "$B")
timeout 120 "$H" boot "$A" >"$WORK/a.log" 2>&1 &
pa=$!
timeout 120 "$H" boot "$B" >"$WORK/b.log" 2>&1 &
pb=$!
ra=0 rb=0
wait "$pa" || ra=$?
wait "$pb" || rb=$?
if [ "$ra" = 0 ] && [ "$rb" = 0 ] && wait_up "$A" && wait_up "$B"; then
        ok "two instances boot in parallel"
else
        not_ok "two instances boot in parallel" "boot $A: $ra" "$(cat "$WORK/a.log")" "boot $B: $rb" "$(cat "$WORK/b.log")"
fi

sa=$(inst "$A" systemctl is-system-running 2>&1)
sb=$(inst "$B" systemctl is-system-running 2>&1)
case "$sa/$sb" in
running/running | running/degraded | degraded/running | degraded/degraded) ok "both instances are running ($sa, $sb)" ;;
*) not_ok "both instances are running" "$A: $sa" "$B: $sb" ;;
esac

ha=$(inst "$A" hostname 2>&1)
hb=$(inst "$B" hostname 2>&1)
if [ -n "$ha" ] && [ -n "$hb" ] && [ "$ha" != "$hb" ] && [ "$ha" = "$A" ] && [ "$hb" = "$B" ] &&
        [ "$ha" != "$(hostname)" ]; then
        ok "the instances' hostnames differ ($ha, $hb)"
else
        not_ok "the instances' hostnames differ" "$A: $ha" "$B: $hb" "host: $(hostname)"
fi

PORT=$((20000 + RANDOM % 20000))
listen() { # name reply → a listener on 127.0.0.1:PORT inside the instance, as a service of its own
        inst "$1" systemd-run --quiet --unit=selftest-listen "$PY" -c '
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
while True:
    c, _ = s.accept()
    c.sendall(sys.argv[2].encode())
    c.close()' "$PORT" "$2"
}
probe='exec 3<>/dev/tcp/127.0.0.1/$0 && head -c 32 <&3'
probe_in() { inst "$1" timeout 5 bash -c "$probe" "$PORT" 2>/dev/null; }
probe_host() { timeout 5 bash -c "$probe" "$PORT" 2>/dev/null; }
poll_probe() { # name expected → true once the instance's own listener answers
        local i
        for i in $(seq 1 100); do
                [ "$(probe_in "$1")" = "$2" ] && return 0
                sleep 0.1
        done
        return 1
}
net_out=()
listen "$A" "hello-$A" || net_out+=("could not start the listener in $A")
poll_probe "$A" "hello-$A" || net_out+=("$A does not reach its own listener on 127.0.0.1:$PORT")
r=$(probe_in "$B") && net_out+=("$B reaches $A's 127.0.0.1:$PORT (got '$r')")
[ "$(probe_host)" = "hello-$A" ] && net_out+=("the host reaches $A's 127.0.0.1:$PORT")
# and the same port is free for B's own listener
listen "$B" "hello-$B" || net_out+=("could not start the listener in $B")
poll_probe "$B" "hello-$B" || net_out+=("$B does not reach its own listener on 127.0.0.1:$PORT")
[ "$(probe_in "$A")" = "hello-$A" ] || net_out+=("$A no longer reaches its own listener")
if [ ${#net_out[@]} = 0 ]; then
        ok "each instance has its own loopback (127.0.0.1:$PORT in one is not the other's)"
else
        not_ok "each instance has its own loopback" "${net_out[@]}"
fi

# --- b. limits on transient scopes inside an instance --------------------------------------------

# b"x" * n writes every page (a zeroed bytearray would not touch them)
out=$(inst "$A" bash -c 'systemd-run --quiet --scope -p MemoryMax=64M "$0" -c "$1"; echo "rc=$?"' "$PY" '
b = b"x" * (200 << 20)
print("allocated", len(b))' 2>&1)
if grep -qx 'rc=137' <<<"$out" && ! grep -q allocated <<<"$out"; then
        ok "MemoryMax=64M kills a scope that touches 200 MB"
else
        not_ok "MemoryMax=64M kills a scope that touches 200 MB" "$out"
fi

out=$(inst "$A" systemd-run --quiet --scope -p TasksMax=10 "$PY" -c '
import os, signal, sys, time
kids, err = [], None
for i in range(20):
    try:
        pid = os.fork()
    except OSError as e:
        err = e
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.kill(k, signal.SIGKILL)
    os.waitpid(k, 0)
print("forked", len(kids), "then", "EAGAIN" if isinstance(err, BlockingIOError) else err)' 2>&1)
if [[ $out =~ forked\ ([0-9]+)\ then\ EAGAIN ]] && [ "${BASH_REMATCH[1]}" -lt 20 ]; then
        ok "TasksMax=10: fork fails before 20 sleepers ($out)"
else
        not_ok "TasksMax=10: fork fails before 20 sleepers" "$out"
fi

# The scope's own cpu cgroup, then ~2 s of busy loop: CPU time over wall time is the share it got.
out=$(inst "$A" systemd-run --quiet --scope -p CPUQuota=20% "$PY" -c '
import time
cg = [l.split(":", 2)[2].strip() for l in open("/proc/self/cgroup") if l.split(":")[1] == "cpu"][0]
d = "/sys/fs/cgroup/cpu" + cg
print("cgroup", cg)
print("quota", open(d + "/cpu.cfs_quota_us").read().strip(), open(d + "/cpu.cfs_period_us").read().strip())
w0, c0 = time.monotonic(), time.process_time()
while time.monotonic() - w0 < 2.0:
    pass
print("share %d" % round(100 * (time.process_time() - c0) / (time.monotonic() - w0)))' 2>&1)
if grep -q '^cgroup /.*\.scope$' <<<"$out" && grep -qx 'quota 20000 100000' <<<"$out"; then
        ok "CPUQuota=20%: the scope's cpu.cfs_quota_us is 20000 of 100000"
else
        not_ok "CPUQuota=20%: the scope's cpu.cfs_quota_us is 20000 of 100000" "$out"
fi
share=$(sed -n 's/^share //p' <<<"$out")
if [ -n "$share" ] && [ "$share" -lt 50 ]; then
        ok "CPUQuota=20%: a busy loop gets ${share}% of a CPU over 2 s"
else
        not_ok "CPUQuota=20%: a busy loop gets less than 50% of a CPU" "$out"
fi

out=$(inst "$A" bash -c 's=$(date +%s%N); systemd-run --quiet --scope -p RuntimeMaxSec=2 sleep 30; rc=$?
echo "rc=$rc ms=$((($(date +%s%N) - s) / 1000000))"' 2>&1)
if [[ $out =~ rc=([0-9]+)\ ms=([0-9]+) ]] && [ "${BASH_REMATCH[1]}" != 0 ] && [ "${BASH_REMATCH[2]}" -lt 10000 ]; then
        ok "RuntimeMaxSec=2 ends a scope of sleep 30 (${BASH_REMATCH[2]} ms, exit ${BASH_REMATCH[1]})"
else
        not_ok "RuntimeMaxSec=2 ends a scope of sleep 30 within 10 s" "$out"
fi

# --- c. clean-up ----------------------------------------------------------------------------------

# 'down' of the two booted instances
timeout 60 "$H" down "$A"
timeout 60 "$H" down "$B"
ra=0 rb=0
outa=$(leftovers "$A") || ra=1
outb=$(leftovers "$B") || rb=1
if [ "$ra$rb" = 00 ]; then ok "down removes both instances"; else
        not_ok "down removes both instances" "$outa" "$outb"; fi

# A run whose command waits for us (we record the instance first), then exits with CODE.
run_and_release() { # name code → the harness's exit status
        local name=$1 code=$2 pid rc=0
        spawn "$WORK/$name.log" run --name "$name" -- bash -c \
                'while [ ! -e /run/selftest-go ]; do sleep 0.05; done; exit '"$code"
        pid=$SPAWNED
        wait_up "$name" || diag "instance $name did not come up"
        inst "$name" touch /run/selftest-go >/dev/null 2>&1
        wait_bounded "$pid" 60 || rc=$?
        return "$rc"
}

rc=0
run_and_release "${TAG}ok" 0 || rc=$?
if [ "$rc" = 0 ]; then ok "run: a command exiting 0 makes the harness exit 0"; else
        not_ok "run: a command exiting 0 makes the harness exit 0" "exit $rc" "$(cat "$WORK/${TAG}ok.log")"; fi
check_clean "run: nothing left after a passing run" "${TAG}ok"

rc=0
run_and_release "${TAG}fail" 3 || rc=$?
if [ "$rc" = 3 ]; then ok "run: a command exiting 3 makes the harness exit 3"; else
        not_ok "run: a command exiting 3 makes the harness exit 3" "exit $rc" "$(cat "$WORK/${TAG}fail.log")"; fi
check_clean "run: nothing left after a failing run" "${TAG}fail"

for sig in TERM INT; do
        name=${TAG}${sig,,}
        spawn "$WORK/$name.log" run --name "$name" -- sleep 100
        pid=$SPAWNED
        wait_up "$name" sleep || diag "instance $name did not come up"
        kill -"$sig" "$pid"
        rc=0
        wait_bounded "$pid" 60 || rc=$?
        want=$((128 + $(kill -l "$sig")))
        if [ "$rc" = "$want" ]; then ok "run: SIG$sig makes the harness exit $want"; else
                not_ok "run: SIG$sig makes the harness exit $want" "exit $rc" "$(cat "$WORK/$name.log")"; fi
        check_clean "run: nothing left after SIG$sig" "$name"
done

# SIGTERM while it boots (as soon as stage 2 has reported its pid): the boot is undone too.
name=${TAG}early
spawn "$WORK/$name.log" run --name "$name" -- sleep 100
pid=$SPAWNED
for i in $(seq 1 1000); do
        [ -s "$STATE/$name/pid1" ] && break
        sleep 0.01
done
PID1[$name]=$(cat "$STATE/$name/pid1" 2>/dev/null)
PID1START[$name]=$(starttime "${PID1[$name]:-0}")
PIDNS[$name]=$(readlink "/proc/${PID1[$name]:-0}/ns/pid" 2>/dev/null)
LAUNCHER[$name]=$(cat "$STATE/$name/launcher" 2>/dev/null)
LAUNCHERSTART[$name]=$(cat "$STATE/$name/launcher.start" 2>/dev/null)
kill -TERM "$pid"
rc=0
wait_bounded "$pid" 60 || rc=$?
if [ "$rc" = 143 ] && [ -n "${PID1[$name]}" ]; then ok "run: SIGTERM during boot makes the harness exit 143"; else
        not_ok "run: SIGTERM during boot makes the harness exit 143" "exit $rc, PID 1 '${PID1[$name]}'" "$(cat "$WORK/$name.log")"; fi
check_clean "run: nothing left after SIGTERM during boot" "$name"

# SIGKILL: no trap runs. The instance must die with the harness (pdeathsig, kill-child); its
# directories stay until the next harness command's gc.
name=${TAG}kill
spawn "$WORK/$name.log" run --name "$name" -- sleep 100
pid=$SPAWNED
wait_up "$name" sleep || diag "instance $name did not come up"
{ kill -KILL "$pid"; wait "$pid"; } 2>/dev/null # (and without bash's "Killed" notice)
gone=
for i in $(seq 1 200); do
        [ "$(starttime "${PID1[$name]}")" = "${PID1START[$name]}" ] || { gone=1; break; }
        sleep 0.05
done
if [ -n "$gone" ]; then ok "run: SIGKILL of the harness takes its instance's PID 1 down"; else
        not_ok "run: SIGKILL of the harness takes its instance's PID 1 down" "PID 1 ${PID1[$name]} still runs"; fi
if [ -d "$STATE/$name" ]; then
        timeout 60 "$H" list >/dev/null
        check_clean "run: the next command's gc removes what a SIGKILLed run left" "$name"
else
        not_ok "run: the next command's gc removes what a SIGKILLed run left" "the state dir vanished by itself: the test proves nothing"
fi

new=$(comm -13 <(printf '%s\n' "$SYSTEMD_CGROUPS_BEFORE") <(host_systemd_cgroups))
if [ -z "$new" ]; then ok "no systemd cgroups leaked into the host's hierarchies"; else
        not_ok "no systemd cgroups leaked into the host's hierarchies" "$new"; fi
if [ -e "$MARKER" ]; then ok "the host's /tmp keeps its files"; else
        not_ok "the host's /tmp keeps its files" "$MARKER is gone"; fi

echo "1..$N"
diag "runtime $((SECONDS - START)) s"
echo "harness: $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
