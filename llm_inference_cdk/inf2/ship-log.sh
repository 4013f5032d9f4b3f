#!/bin/bash
# The bootstrap's log to CloudWatch Logs. Every minute, as the first step of djl-serving-health.service,
# it sends what the bootstrap wrote since its last run, whole lines only, to the server's log group
# (stream bootstrap-<instance id>) beside the container's stream (djl-serving). The bootstrap starts
# that timer before any step that can fail, so a failed download, pull or check reaches the
# dashboard's log widget within a minute or two. Each event carries the time it was sent (the lines
# carry none). What was sent is remembered in BOOTSTRAP_LOG.sent (a byte offset): a failed call sends
# the same lines at the next run, and a log that shrank was replaced and is sent from its start.
# At most 900 lines of at most 1000 bytes a run: PutLogEvents takes 10,000 events and 1 MiB a call.
# Settings: /etc/default/llm-inference-metrics, written by the bootstrap. The AWS CLI and python3
# are the DLAMI's; the instance role may write to the log group alone.
set -euo pipefail
: "${REGION:?}" "${LOG_GROUP:?}" "${INSTANCE_ID:?}" "${BOOTSTRAP_LOG:?}"
sent=$(cat "$BOOTSTRAP_LOG.sent" 2>/dev/null || echo 0)
size=$(stat -c %s "$BOOTSTRAP_LOG" 2>/dev/null || echo 0)
[ "$size" -ge "$sent" ] || sent=0
batch=$(mktemp)
trap 'rm -f "$batch"' EXIT
read -r bytes events < <(tail -c "+$((sent + 1))" "$BOOTSTRAP_LOG" | head -c "$((size - sent))" | python3 -c '
import json,sys,time
d=sys.stdin.buffer.read();l=d[:d.rfind(b"\n")+1].split(b"\n")[:-1][:900];t=int(time.time()*1000)
e=[{"timestamp":t,"message":x[:1000].decode("utf-8","replace")} for x in l if x.strip()]
json.dump(e,open(sys.argv[1],"w"));print(sum(len(x)+1 for x in l),len(e))' "$batch")
if [ "$events" -gt 0 ]; then
  a=(--region "$REGION" --log-group-name "$LOG_GROUP" --log-stream-name "bootstrap-$INSTANCE_ID")
  aws logs create-log-stream "${a[@]}" >/dev/null 2>&1 || true
  aws logs put-log-events "${a[@]}" --log-events "file://$batch" >/dev/null
fi
echo $((sent + bytes)) >"$BOOTSTRAP_LOG.sent"
