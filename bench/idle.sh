# shellcheck shell=bash
# Sourced by the benchmark scripts: wait for the CPUs to be idle before a run.
# Other processes on 2 cores ruin the figures, so wait_idle waits up to
# IDLE_WAIT seconds for the CPUs to be under IDLE_PCT % busy, and says so when
# they never are. Needs IDLE_WAIT and IDLE_PCT set by the caller.

# Share of all CPUs busy over IDLE_SAMPLE_S seconds (default 1), from /proc/stat.
cpu_busy() {
  local a b
  read -r -a a < <(grep '^cpu ' /proc/stat); sleep "${IDLE_SAMPLE_S:-1}"; read -r -a b < <(grep '^cpu ' /proc/stat)
  local ta=0 tb=0 i
  for i in 1 2 3 4 5 6 7 8; do ta=$((ta + a[i])); tb=$((tb + b[i])); done
  local t=$((tb - ta)) idle=$(( (b[4] + b[5]) - (a[4] + a[5]) ))
  [ "$t" -gt 0 ] && echo $(( 100 * (t - idle) / t )) || echo 0
}

wait_idle() {
  local deadline=$((SECONDS + IDLE_WAIT)) b
  while :; do
    b="$(cpu_busy)"
    [ "$b" -lt "$IDLE_PCT" ] && return 0
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "    WARNING: CPUs still ${b}% busy with other work after ${IDLE_WAIT}s; figures will be low"
      return 0
    fi
  done
}
