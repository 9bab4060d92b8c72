# `meshtrain run` with parallel.data = "parameter_server": servers get
# MESHTRAIN_SERVER_ADDRS and the workers train through them. Skipped while
# this build has no `meshtrain ps-server`.
source "$(dirname "$0")/lib.sh"
"$MESHTRAIN" --help > help.txt
grep -q "^ *ps-server " help.txt || { echo "no ps-server command: skipped"; exit 77; }
make_text data.txt 100000
tiny_config job.toml data.txt
"$MESHTRAIN" run job.toml --nproc 2 --parallel.data=parameter_server --parallel.servers=1 \
  --parallel.timeout_s=10 > ps.txt 2>&1 || { cat ps.txt; fail "parameter-server run"; }
grep -q "^\[server 0\] " ps.txt || { cat ps.txt; fail "no [server 0] output"; }
grep -q "^\[worker 1\] " ps.txt || grep -q "^\[worker 0\] " ps.txt || { cat ps.txt; fail "no worker output"; }
echo "run parameter server ok"
