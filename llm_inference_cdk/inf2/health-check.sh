#!/bin/bash
# djl-serving-health.service, every minute (djl-serving-health.timer): whether DJL Serving answers
# /ping, and how long a one-token invocation takes, as CloudWatch metrics of the instance.
# ServerHealthy is 1 when /ping answers 200, else 0; 0 while the model loads too (DJL opens its
# port only once every copy is loaded): the alarm on it waits longer than the load may take
# (Inf2Server.add_health_alarm). InvocationLatency is the time of a real request, PROBE_FILE's body
# (one new token), sent only to a healthy server and left out when it fails.
# Settings: /etc/default/llm-inference-metrics, written by the bootstrap. The AWS CLI is the
# DLAMI's, with the instance role's credentials (cloudwatch:PutMetricData in NAMESPACE alone).
set -euo pipefail
: "${REGION:?}" "${NAMESPACE:?}" "${INSTANCE_ID:?}" "${PORT:?}" "${PROBE_FILE:?}"

server="http://127.0.0.1:$PORT"
dimensions="[{\"Name\":\"InstanceId\",\"Value\":\"$INSTANCE_ID\"}]"
healthy=0
if curl -fsS -o /dev/null --max-time 5 "$server/ping"; then
  healthy=1
fi
data="{\"MetricName\":\"ServerHealthy\",\"Value\":$healthy,\"Unit\":\"Count\",\"Dimensions\":$dimensions}"
if [ "$healthy" = 1 ]; then
  # Below the timer's minute, with room for the publication.
  if seconds=$(curl -fsS -o /dev/null -w '%{time_total}' --max-time 45 -H 'Content-Type: application/json' \
    --data-binary "@$PROBE_FILE" "$server/invocations"); then
    ms=$(awk -v s="$seconds" 'BEGIN { printf "%.1f", s * 1000 }')
    data+=",{\"MetricName\":\"InvocationLatency\",\"Value\":$ms,\"Unit\":\"Milliseconds\",\"Dimensions\":$dimensions}"
  else
    echo "djl-serving-health: the probe invocation failed (see the server's log: journalctl -u djl-serving)" >&2
  fi
fi
exec aws cloudwatch put-metric-data --region "$REGION" --namespace "$NAMESPACE" --metric-data "[$data]"
