# shellcheck shell=bash
# Sourced, not run (by scripts/test.sh and scripts/sanitize.sh): announces each step and prints its
# wall time and CPU seconds (user + system of the calling script's finished children: with the
# wall time, it tells a busy machine from a slow step).
#   step_prefix=NAME; source scripts/step_timing.sh   (NAME starts every line it prints)
#   step DESCRIPTION...   announces the next step, with the seconds since sourcing;
#   done_step             prints the step's wall and CPU seconds;
#   all_passed            prints the total wall and CPU seconds;
#   read_cpu              sets $cpu to the CPU seconds so far.
# `times` must run in the calling shell, not in a subshell ($(times) would report the subshell's
# children, none), hence the temporary file; sourcing sets an EXIT trap that removes it.
: "${step_prefix:?set step_prefix before sourcing step_timing.sh}"
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
cpu=0
read_cpu() {
  times >"$times_file"
  cpu=$(awk 'NR == 2 { gsub(/[ms]/, " "); print int($1 * 60 + $2 + $3 * 60 + $4) }' "$times_file")
}
started=$SECONDS
step_started=$SECONDS
step_cpu=0
step() {  # announces the next step
  echo "$step_prefix: $* (after $((SECONDS - started)) s)"
  step_started=$SECONDS
  read_cpu
  step_cpu=$cpu
}
done_step() {
  read_cpu
  echo "$step_prefix:   took $((SECONDS - step_started)) s, $((cpu - step_cpu)) CPU-s"
}
all_passed() {
  read_cpu
  echo "$step_prefix: all passed in $((SECONDS - started)) s, $cpu CPU-s"
}
