#!/usr/bin/env bash
# Boot a one-node SLURM (slurmctld + slurmd on 127.0.0.1, ports $WQK_SLURM_PORT and +1,
# default 6817/6818, a fake count-only GPU); state, logs and pid files live in DIR.
#   bash tests/slurm/slurm_up.sh DIR        stop with: bash tests/slurm/slurm_down.sh DIR
# The config goes to /etc/slurm (SLURM_CONF elsewhere does not work: the plugin's job step
# drops SLURM_* variables before its inner srun); an existing config not written by this
# script is never overwritten. Needs root and the packages in apt-packages.txt; exits
# non-zero, with the logs, if the node does not come up idle.
set -euo pipefail
DIR=$(realpath -m "${1:?usage: slurm_up.sh DIR}")
HERE=$(dirname "$(realpath "$0")")
t0=$SECONDS

[ "$(id -u)" = 0 ] || { echo "[slurm_up] must run as root" >&2; exit 1; }
for exe in munged mungekey slurmctld slurmd sinfo sbatch squeue; do
  command -v "$exe" >/dev/null || {
    echo "[slurm_up] '$exe' not found: apt-get install -y --no-install-recommends" \
         "$(grep -v '^#' "$HERE/apt-packages.txt" | xargs)" >&2; exit 1; }
done

HOST=$(hostname -s)
NCPU=$(nproc)
MEM=$(( $(free -m | awk '/^Mem:/{print $2}') * 9 / 10 ))
PORT=${WQK_SLURM_PORT:-6817}
MARK="# written by wqk tests/slurm/slurm_up.sh"
REGISTRY=/run/wqk-test-slurm.dir   # DIR of the instance now up, for slurm_down of a killed run

# daemons of an earlier run that was killed before its slurm_down.sh: stop them by pid file
[ -s "$REGISTRY" ] && bash "$HERE/slurm_down.sh" "$(cat "$REGISTRY")"
for port in "$PORT" $((PORT + 1)); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "[slurm_up] port $port is in use; running SLURM daemons (pid: cwd):" >&2
    for pid in $(pgrep -x 'slurmctld|slurmd'); do echo "  $pid: $(readlink "/proc/$pid/cwd")" >&2; done
    echo "[slurm_up] stop them first (left by an earlier test: bash $HERE/slurm_down.sh" \
         "FOLDER, the folder above log/), or set WQK_SLURM_PORT to two free ports" >&2
    exit 1
  fi
done
mkdir -p "$DIR"/{ctld,spool,log} /etc/slurm
for f in slurm.conf gres.conf; do
  if [ -e "/etc/slurm/$f" ] && ! grep -qxF "$MARK" "/etc/slurm/$f"; then
    echo "[slurm_up] /etc/slurm/$f exists and is not ours: not touching a real cluster" >&2
    exit 1
  fi
  { echo "$MARK"
    sed -e "s|@HOST@|$HOST|g" -e "s|@NCPU@|$NCPU|g" -e "s|@MEM@|$MEM|g" -e "s|@DIR@|$DIR|g" \
        -e "s|@PORT@|$PORT|g" -e "s|@PORT1@|$((PORT + 1))|g" \
      "$HERE/$f.in"; } > "/etc/slurm/$f"
done

# munge: reuse a running munged, else start one and record its pid for slurm_down.sh
[ -s /etc/munge/munge.key ] || mungekey --create
chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
install -d -o munge -g munge -m 755 /run/munge
if ! munge -n >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
  cp /run/munge/munged.pid "$DIR/munged.pid"
fi
munge -n | unmunge >/dev/null

slurmctld -c    # -c: no state from an earlier run (drained node, old jobs)
slurmd
for _ in $(seq 150); do
  [ "$(sinfo -h -n "$HOST" -o '%T' 2>/dev/null)" = idle ] && break; sleep 0.2
done
echo "$DIR" > "$REGISTRY"
for daemon in slurmctld slurmd; do   # ours, not someone else's, must be the ones answering
  kill -0 "$(cat "$DIR/$daemon.pid" 2>/dev/null)" 2>/dev/null || {
    tail -n 30 "$DIR"/log/*.log >&2; echo "[slurm_up] $daemon did not stay up" >&2; exit 1; }
done
if [ "$(sinfo -h -n "$HOST" -o '%T' 2>/dev/null)" != idle ]; then
  sinfo >&2 || true
  tail -n 30 "$DIR"/log/*.log >&2 || true
  echo "[slurm_up] node $HOST not idle after 30 s" >&2
  exit 1
fi
srun -N1 -n1 true
echo "[slurm_up] SLURM up in $DIR after $((SECONDS - t0)) s"
