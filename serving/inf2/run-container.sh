#!/bin/bash
# Runs the DJL Serving container in the foreground for systemd (djl-serving.service),
# with every Neuron device of the instance.
set -euo pipefail
: "${IMAGE_URI:?}" "${REGION:?}" "${LOG_GROUP:?}" "${PORT:?}" "${MODEL_DIR:?}" "${CACHE_DIR:?}" "${LOG_DIR:?}"
: "${LOAD_TIMEOUT_S:?}"

devices=()
for dev in /dev/neuron*; do
  [ -e "$dev" ] && devices+=(--device "$dev")
done
if [ "${#devices[@]}" -eq 0 ]; then
  echo "no /dev/neuron* device: is the Neuron driver loaded?" >&2
  exit 1
fi

# The cache mount keeps compiled graphs (OPTION_COMPILED_GRAPH_PATH for DJL's handlers,
# NEURON_COMPILE_CACHE_URL for the compiler) and model.py's split checkpoint on the volume.
exec /usr/bin/docker run --rm --name djl-serving \
  "${devices[@]}" \
  -p "$PORT:8080" \
  -v "$MODEL_DIR:/opt/ml/model:ro" \
  -v "$CACHE_DIR:/opt/ml/neuron-cache" \
  -v "$LOG_DIR:/opt/djl/logs" \
  -e OPTION_COMPILED_GRAPH_PATH=/opt/ml/neuron-cache \
  -e NEURON_COMPILE_CACHE_URL=/opt/ml/neuron-cache/compiler \
  -e MODEL_LOADING_TIMEOUT="$LOAD_TIMEOUT_S" \
  --log-driver awslogs \
  --log-opt awslogs-region="$REGION" \
  --log-opt awslogs-group="$LOG_GROUP" \
  --log-opt awslogs-stream=djl-serving \
  "$IMAGE_URI" serve
