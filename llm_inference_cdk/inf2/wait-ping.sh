#!/bin/bash
# ExecStartPost of djl-serving.service: the unit counts as started only once DJL Serving
# answers /ping. A server that does not within LOAD_TIMEOUT_S fails its start, and
# systemd restarts it (Restart=on-failure).
set -euo pipefail
: "${PORT:?}" "${LOAD_TIMEOUT_S:?}"

deadline=$((SECONDS + LOAD_TIMEOUT_S))
until curl -fsS -o /dev/null --max-time 5 "http://127.0.0.1:$PORT/ping"; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "DJL Serving did not answer /ping within ${LOAD_TIMEOUT_S}s" >&2
    exit 1
  fi
  sleep 10
done
echo "DJL Serving answers /ping on port $PORT"
