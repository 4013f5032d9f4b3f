#!/bin/bash
# Runs the DJL Serving container in the foreground for systemd (djl-serving.service),
# with every Neuron device of the instance.
# RUN_DOCKER and RUN_NEURON_DEVICES move the docker binary and the device glob (the stack sets
# neither; tests/inf2/test_instance.py runs the script against a stub docker that way).
set -euo pipefail
: "${IMAGE_URI:?}" "${REGION:?}" "${LOG_GROUP:?}" "${PORT:?}" "${PUBLISH_ADDRESS:?}" "${MODEL_DIR:?}" "${CACHE_DIR:?}"
: "${LOG_DIR:?}"
DOCKER=${RUN_DOCKER:-/usr/bin/docker}
NEURON_DEVICES=${RUN_NEURON_DEVICES:-/dev/neuron*}

devices=()
for dev in $NEURON_DEVICES; do
  [ -e "$dev" ] && devices+=(--device "$dev")
done
if [ "${#devices[@]}" -eq 0 ]; then
  echo "no $NEURON_DEVICES device: is the Neuron driver loaded?" >&2
  exit 1
fi

# The cache mount keeps compiled graphs (OPTION_COMPILED_GRAPH_PATH for DJL's handlers,
# NEURON_COMPILE_CACHE_URL for the compiler) and model.py's split checkpoint on the volume.
# The image keeps the Hugging Face hub cache in /tmp/.cache (HF_HOME and TRANSFORMERS_CACHE
# in djl-serving v0.29.0's pytorch-inf2.Dockerfile): mounted from the volume, a restart before
# the split checkpoint is complete does not download the model again.
# DJL's model loading timeout is option.model_loading_timeout in the bundle's serving.properties;
# the MODEL_LOADING_TIMEOUT variable is read only when that key is absent (PyEnv.java).
# The port is published on PUBLISH_ADDRESS: 127.0.0.1 unless an ingress CIDR is configured (SSM
# port forwarding connects to the host's loopback), so nothing else on the network reaches it.
# The container runs with no capability and cannot gain one (setuid binaries included). Neuron
# needs none: the devices come through --device (cgroup rules and device nodes that docker sets
# up before the capabilities are dropped), and the Neuron runtime, a library in the server's own
# process since Neuron SDK 2.x, asks for no capability in the Neuron docs' container examples
# (docker run --device=/dev/neuron0 ...; IPC_LOCK was for the 1.x runtime daemon, neuron-rtd).
# Nor does DJL need Docker's default set (djl-serving v0.29.0's pytorch-inf2.Dockerfile and
# dockerd-entrypoint.sh): it runs as root, switches to no other user, and writes only where root
# owns or anyone may (the mounts below, /tmp, the image's Python packages for requirements.txt).
exec "$DOCKER" run --rm --name djl-serving \
  "${devices[@]}" \
  --cap-drop ALL \
  --security-opt no-new-privileges \
  -p "$PUBLISH_ADDRESS:$PORT:8080" \
  -v "$MODEL_DIR:/opt/ml/model:ro" \
  -v "$CACHE_DIR:/opt/ml/neuron-cache" \
  -v "$CACHE_DIR/hub-cache:/tmp/.cache" \
  -v "$LOG_DIR:/opt/djl/logs" \
  -e OPTION_COMPILED_GRAPH_PATH=/opt/ml/neuron-cache \
  -e NEURON_COMPILE_CACHE_URL=/opt/ml/neuron-cache/compiler \
  --log-driver awslogs \
  --log-opt awslogs-region="$REGION" \
  --log-opt awslogs-group="$LOG_GROUP" \
  --log-opt awslogs-stream=djl-serving \
  "$IMAGE_URI" serve
