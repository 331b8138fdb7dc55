# shellcheck shell=bash
# Sourced, not run, by the one-call GPU scripts (gpu-check.sh, gpu-kernels-check.sh,
# storage-gpu-check.sh): each step's output goes to its own log, and one table of the steps'
# status and seconds is printed last (the device tool brings back only a few files, so the table
# is what a reader sees first).
#   logs=DIR; source scripts/gpu_step_log.sh
#   step NAME COMMAND...   runs COMMAND with its output in DIR/NAME.log; returns its status;
#   step_skipped NAME WHY  records a step that could not run, and why;
#   print_steps            prints the table and writes it to DIR/summary.txt.
: "${logs:?set logs before sourcing gpu_step_log.sh}"
declare -a step_rows
step() {
  local name=$1; shift
  local start
  start=$(date +%s%N)
  "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  local millis=$(( ($(date +%s%N) - start) / 1000000 ))
  step_rows+=("$(printf '%-34s %-8s %6d.%03d s' "$name" "$([ $rc = 0 ] && echo ok || echo "FAIL:$rc")" \
                 $((millis / 1000)) $((millis % 1000)))")
  return $rc
}
step_skipped() {
  step_rows+=("$(printf '%-34s %-8s (%s)' "$1" SKIPPED "$2")")
}
print_steps() {
  printf '%s\n' "${step_rows[@]}" | tee "$logs/summary.txt"
}
