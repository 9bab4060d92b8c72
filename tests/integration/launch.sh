# `meshtrain launch` starts N ranks with the torchrun environment, prefixes
# their output, and stops the rest when one fails.
source "$(dirname "$0")/lib.sh"
"$MESHTRAIN" launch --nproc 3 -- bash -c 'echo "rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK addr=$MASTER_ADDR port=$MASTER_PORT job=${MESHTRAIN_JOB_ID:+set} token=${#MESHTRAIN_JOB_TOKEN}"' > out.txt
for r in 0 1 2; do
  grep -q "^\[rank $r\] rank=$r world=3 local=$r addr=127.0.0.1 port=[0-9]* job=set token=32$" out.txt || { cat out.txt; fail "rank $r environment"; }
done
[ "$(grep -o 'port=[0-9]*' out.txt | sort -u | wc -l)" = 1 ] || fail "ranks got different ports"

# A failing rank stops the others (which would sleep 60 s) and sets the exit status.
start=$(date +%s)
set +e
"$MESHTRAIN" launch --nproc 4 -- bash -c 'if [ "$RANK" = 2 ]; then echo dying; exit 7; fi; sleep 60' > fail.txt 2>&1
rc=$?
set -e
[ "$rc" = 7 ] || { cat fail.txt; fail "exit status $rc, expected 7"; }
[ $(( $(date +%s) - start )) -lt 20 ] || fail "the other ranks were not stopped"
grep -q "rank 2 exited with status 7" fail.txt || { cat fail.txt; fail "no failure summary"; }

# A command that does not exist fails clearly.
set +e
"$MESHTRAIN" launch --nproc 2 -- /nonexistent/program > missing.txt 2>&1
rc=$?
set -e
[ "$rc" = 127 ] || { cat missing.txt; fail "missing program: exit $rc"; }
grep -q "cannot run '/nonexistent/program'" missing.txt || { cat missing.txt; fail "no message for a missing program"; }
echo "launch ok"
