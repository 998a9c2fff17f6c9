#!/usr/bin/env bash
# Stop what slurm_up.sh DIR started: cancel jobs, kill the pids recorded in DIR only,
# remove the config files slurm_up.sh wrote.
DIR=$(realpath -m "${1:?usage: slurm_down.sh DIR}")
MARK="# written by wqk tests/slurm/slurm_up.sh"
[ -s "$DIR/slurmctld.pid" ] && timeout 10 scancel --user="$(id -un)" 2>/dev/null
pids=()
for pf in "$DIR/slurmd.pid" "$DIR/slurmctld.pid" "$DIR/munged.pid"; do
  [ -s "$pf" ] || continue
  pid=$(cat "$pf"); rm -f "$pf"
  kill "$pid" 2>/dev/null && pids+=("$pid")
done
for pid in "${pids[@]}"; do
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
done
[ "$(cat /run/wqk-test-slurm.dir 2>/dev/null)" = "$DIR" ] && rm -f /run/wqk-test-slurm.dir
for f in /etc/slurm/slurm.conf /etc/slurm/gres.conf; do
  grep -qxF "$MARK" "$f" 2>/dev/null && rm -f "$f"
done
true
