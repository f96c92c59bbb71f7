#!/usr/bin/env bash
# Runs the test jobs of make test, TEST_JOBS at a time (default 3), and
# prints each job's output whole when it ends, with its time. A job is one
# go test command: the unit tests, one bed suite, or the suites that use
# the machine's one real node (run one after the other in a single job).
#
#   hack/test-jobs.sh unit|integration|e2e|all
#
# Most bed suites spend their time waiting on their cluster (pods
# scheduled, controllers reconciling, registries answering), so several of
# them side by side take little longer than one; the cross-compiles of the
# unit tests' compiles fill the cores meanwhile. Jobs start longest first
# (the order of SLOW_FIRST), so the longest does not start last; the real
# node's job first and alone (below).
#
# The Makefile passes, in the environment: BUILD_TAGS, GO_LDFLAGS, RACE
# (-race or empty), TEST_FLAGS, UNIT_PKGS, RACE_SUITES, INTEGRATION_PKGS,
# E2E_PKGS, REAL_NODE_SUITES, SLOW_FIRST (package lists, space separated).
set -uo pipefail

what=${1:-all}
parallel=${TEST_JOBS:-3}
case "$parallel" in
'' | *[!0-9]* | 0)
	echo "hack/test-jobs.sh: TEST_JOBS=$parallel: give a number of jobs to run at once, 1 or more" >&2
	exit 2
	;;
esac
# A job starts beside others only when the cores were TEST_JOBS_FREE_CPU
# percent free (default 50: one core of two) over the last
# room_window seconds (await_room); 0 starts jobs as soon as one ends.
free_cpu=${TEST_JOBS_FREE_CPU:-50}
case "$free_cpu" in
'' | *[!0-9]*)
	echo "hack/test-jobs.sh: TEST_JOBS_FREE_CPU=$free_cpu: give a percent of the cores, 0 to 100" >&2
	exit 2
	;;
esac
room_window=10

# shellcheck disable=SC2206 # the lists and flags are space separated.
unit=(${UNIT_PKGS:-})
# shellcheck disable=SC2206
race_suites=(${RACE_SUITES:-})
# shellcheck disable=SC2206
integration=(${INTEGRATION_PKGS:-})
# shellcheck disable=SC2206
e2e=(${E2E_PKGS:-})
# shellcheck disable=SC2206
real_node=(${REAL_NODE_SUITES:-})
# shellcheck disable=SC2206
slow_first=(${SLOW_FIRST:-})
# shellcheck disable=SC2206
test_flags=(${TEST_FLAGS:-})
go_test=(go test -tags "${BUILD_TAGS:-}" -ldflags "${GO_LDFLAGS:-}" "${test_flags[@]}")

contains() {
	local x=$1
	shift
	local y
	for y in "$@"; do [ "$x" = "$y" ] && return 0; done
	return 1
}

# cpu_of FILE prints the seconds of user and system time a job's processes
# took, from the second line of bash's times in FILE ("1m2.5s 0m3.1s": the
# children's), so that what a job costs shows beside how long it took
# among the others.
cpu_of() {
	local line u s
	line=$(sed -n 2p "$1" 2>/dev/null) || return 0
	[ -n "$line" ] || return 0
	read -r u s <<<"$line"
	awk -v u="$u" -v s="$s" 'function sec(t, m) { split(t, m, "m"); sub("s", "", m[2]); return m[1] * 60 + m[2] }
		BEGIN { printf "%d", sec(u) + sec(s) }'
}
# names[i] and cmds[i] are job i; cmds hold a command line for eval,
# quoted with printf %q.
names=()
cmds=()
add() {
	local name=$1
	shift
	names+=("$name")
	cmds+=("$(printf '%q ' "$@")")
}

suites=()
if [ "$what" = integration ] || [ "$what" = all ]; then suites+=("${integration[@]}"); fi
if [ "$what" = e2e ] || [ "$what" = all ]; then suites+=("${e2e[@]}"); fi
case "$what" in unit | integration | e2e | all) ;; *)
	echo "hack/test-jobs.sh: $what: give unit, integration, e2e or all" >&2
	exit 2
	;;
esac

# The real node's suites, one after the other: two real nodes cannot share
# a machine (test/bed/node.go).
rn=()
for p in "${suites[@]}"; do
	if contains "$p" "${real_node[@]}"; then rn+=("$p"); fi
done
suite_job() {
	local p=$1
	local race=
	if contains "$p" "${race_suites[@]}"; then race=${RACE:-}; fi
	# shellcheck disable=SC2086 # race is one flag or none.
	add "${p#github.com/archway-build/archway/}" "${go_test[@]}" $race -timeout 40m "$p"
}
unit_job() {
	if { [ "$what" = unit ] || [ "$what" = all ]; } && [ ${#unit[@]} -gt 0 ]; then
		# shellcheck disable=SC2086
		add "unit" "${go_test[@]}" ${RACE:-} "${unit[@]}"
	fi
}
# Longest first: the real node's suites, then SLOW_FIRST's (where the word
# unit places the unit tests), then the rest in go list's order.
if [ ${#rn[@]} -gt 0 ]; then
	add "real node: ${rn[*]##*/archway/}" "${go_test[@]}" -p 1 -timeout 40m "${rn[@]}"
fi
for p in "${slow_first[@]}"; do
	if [ "$p" = unit ]; then
		unit_job
	elif contains "$p" "${suites[@]}" && ! contains "$p" "${rn[@]}"; then
		suite_job "$p"
	fi
done
contains unit "${slow_first[@]}" || unit_job
for p in "${suites[@]}"; do
	if ! contains "$p" "${rn[@]}" && ! contains "$p" "${slow_first[@]}"; then suite_job "$p"; fi
done

# Every package compiled once, with both cores, before the jobs start:
# jobs started together would each compile the packages they share at the
# same time (the Go build cache shares a compile only once it is done).
# The race detector's variants too when a job runs with it.
race_jobs=0
for c in "${cmds[@]}"; do
	case " $c " in *" -race "*) race_jobs=1 ;; esac
done
compile() {
	local begin=$SECONDS times
	times=$(mktemp)
	echo "=== compiling every package for the jobs: go build $*"
	(
		go build -tags "${BUILD_TAGS:-}" "$@" ./...
		rc=$?
		times >"$times"
		exit $rc
	) || {
		echo "=== go build $* failed: no job started"
		exit 1
	}
	echo "=== compiled in $((SECONDS - begin))s, cpu $(cpu_of "$times")s"
	rm -f "$times"
}
if [ ${#suites[@]} -gt 0 ]; then compile; fi
# The real node's job (first when there is one) runs alone: its images
# suite cross-compiles archway for four architectures (about 15 minutes
# of both cores on a new machine) and, sharing the cores with three other
# jobs, ran past its 40-minute timeout. The race detector's compile runs
# beside it at the lowest priority, in the time its suites wait, and at
# the normal one once it ended; only the jobs that run with -race wait
# for it (on a new machine it ended five minutes after the real node's
# job, and every job waited).
solo=-1
[ ${#rn[@]} -eq 0 ] || solo=0
logs=$(mktemp -d /tmp/archway-test-jobs-XXXXXX)
trap 'rm -rf "$logs"' EXIT
race_pid=
race_rc=$logs/race.rc
if [ $race_jobs -eq 1 ]; then
	if [ $solo -ge 0 ]; then
		nice -n 19 bash -c "$(declare -f compile cpu_of); (compile -race); echo \$? >'$race_rc.tmp'; mv '$race_rc.tmp' '$race_rc'" &
		race_pid=$!
	else
		compile -race
	fi
fi
# race_ready says whether a job with -race may start: the race compile
# ended well, or runs not at all. When it failed, no such job starts.
race_ready() {
	[ -n "$race_pid" ] || return 0
	[ -e "$race_rc" ] || return 1
	[ "$(cat "$race_rc")" = 0 ] && return 0
	echo "=== go build -race failed: no job with -race started"
	while [ ${#running[@]} -gt 0 ]; do wait_one; done
	exit 1
}
needs_race() {
	case " ${cmds[$1]} " in *" -race "*) return 0 ;; esac
	return 1
}
# renice_tree PID sets the priority of PID and its descendants back to
# normal. A priority is a thread's on Linux, and a process started later
# takes that of the thread that starts it: every thread of the go command
# is set (its main thread alone left the compiles and links it started
# afterwards at nice 19).
renice_tree() {
	local c t
	for t in /proc/"$1"/task/*; do
		renice -n 0 -p "${t##*/}" >/dev/null 2>&1 || true
	done
	command -v pgrep >/dev/null || return 0
	for c in $(pgrep -P "$1"); do renice_tree "$c"; done
}

echo "=== ${#names[@]} test jobs, $parallel at a time"
start=$SECONDS
declare -A running=() began=()
cpu_total=0
failed=()
finish() {
	local pid=$1 rc=$2 i=${running[$1]}
	unset "running[$pid]"
	local status=ok
	[ "$rc" -eq 0 ] || {
		status="FAILED (exit $rc)"
		failed+=("${names[$i]}")
	}
	local cpu
	cpu=$(cpu_of "$logs/$i.cpu")
	cpu_total=$((cpu_total + ${cpu:-0}))
	echo "=== job ${names[$i]}: $status in $((SECONDS - ${began[$i]}))s${cpu:+, cpu ${cpu}s}"
	cat "$logs/$i.log"
	[ "$rc" -eq 0 ] || echo "=== job ${names[$i]} ran: ${cmds[$i]}"
}
wait_one() {
	local pid rc
	wait -n -p pid "${!running[@]}"
	rc=$?
	finish "$pid" "$rc"
}
# stat_sample sets busy and total to /proc/stat's jiffies of all cores:
# busy is what normal-priority work took (user, system, irq, softirq,
# steal); niced work (lint in CI, the race compile) yields to the jobs
# and counts as free, as idle and iowait do.
stat_sample() {
	local _cpu user nice system idle iowait irq softirq steal _rest
	read -r _cpu user nice system idle iowait irq softirq steal _rest </proc/stat
	busy=$((user + system + irq + softirq + steal))
	total=$((busy + nice + idle + iowait))
}
# await_room waits until the cores were at least free_cpu percent free
# over a window of room_window seconds, reaping jobs that end meanwhile:
# a job started while the others keep both cores busy only slows them
# (each bed's apiserver, controllers and test share the same cores), and a
# wait of theirs with a figure runs out: in a CI run where jobs started as
# soon as others ended (the cores 90% busy for an hour), placement's
# 1,000-pod case saw its writes time out after 45 s and the protection
# suite's apiserver did not start in five tries.
await_room() {
	local busy total b0 t0 free waited=0 sleeper pid rc
	[ "$free_cpu" -gt 0 ] || return 0
	while [ ${#running[@]} -gt 0 ]; do
		stat_sample
		b0=$busy t0=$total
		sleep "$room_window" &
		sleeper=$!
		wait -n -p pid "${!running[@]}" "$sleeper"
		rc=$?
		if [ "$pid" != "$sleeper" ]; then
			kill "$sleeper" 2>/dev/null
			wait "$sleeper" 2>/dev/null
			finish "$pid" "$rc"
			continue
		fi
		stat_sample
		[ $((total - t0)) -gt 0 ] || return 0
		free=$((100 - 100 * (busy - b0) / (total - t0)))
		if [ "$free" -ge "$free_cpu" ]; then
			[ $waited -eq 0 ] || echo "=== the cores are ${free}% free after ${waited}s: starting the next job"
			return 0
		fi
		[ $waited -gt 0 ] || echo "=== the cores are ${free}% free (under ${free_cpu}%): the next job waits"
		waited=$((waited + room_window))
	done
}
# start_job I starts job I in the background.
start_job() {
	local i=$1
	echo "=== job ${names[$i]}: started $((SECONDS - start))s in"
	began[$i]=$SECONDS
	(
		eval "${cmds[$i]}"
		rc=$?
		times >"$logs/$i.cpu"
		exit $rc
	) >"$logs/$i.log" 2>&1 </dev/null &
	running[$!]=$i
}
pending=("${!names[@]}")
while [ ${#pending[@]} -gt 0 ]; do
	while [ ${#running[@]} -ge "$parallel" ]; do wait_one; done
	await_room
	# The first job in order that may start: one with -race waits for
	# the race compile, the others go ahead of it meanwhile.
	pick=-1
	for k in "${!pending[@]}"; do
		if ! needs_race "${pending[$k]}" || race_ready; then
			pick=${pending[$k]}
			unset "pending[$k]"
			pending=("${pending[@]}")
			break
		fi
	done
	if [ "$pick" -lt 0 ]; then
		# Every job left needs the race compile: wait for it or a job.
		if [ ${#running[@]} -eq 0 ]; then
			wait "$race_pid"
		else
			wait -n -p pid "${!running[@]}" "$race_pid"
			rc=$?
			[ "$pid" = "$race_pid" ] || finish "$pid" "$rc"
		fi
		continue
	fi
	start_job "$pick"
	if [ "$pick" -eq "$solo" ]; then
		while [ ${#running[@]} -gt 0 ]; do wait_one; done
		[ -z "$race_pid" ] || [ -e "$race_rc" ] || renice_tree "$race_pid"
	fi
done
while [ ${#running[@]} -gt 0 ]; do wait_one; done
echo "=== ${#names[@]} test jobs done in $((SECONDS - start))s, cpu ${cpu_total}s${failed[*]:+; failed: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
