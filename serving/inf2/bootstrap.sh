#!/bin/bash
# First-boot (and re-runnable) setup of the inf2 model server. Every step is idempotent:
# running it again converges to the same state without recompiling the model.
# The stack prepends the settings (BUNDLE_URL, BUNDLE_SHA256, IMAGE_URI, ...), the
# systemd unit and its start script (stacks/inf2_ec2.py: render_user_data).
set -euo pipefail
exec > >(tee -a /var/log/llm-inference-bootstrap.log) 2>&1

: "${BUNDLE_URL:?}" "${BUNDLE_SHA256:?}" "${IMAGE_URI:?}" "${REGION:?}" "${LOG_GROUP:?}" "${PORT:?}"

ROOT=/opt/llm-inference
MODEL_DIR="$ROOT/model"
CACHE_DIR="$ROOT/neuron-cache"
LOG_DIR="$ROOT/logs"
mkdir -p "$MODEL_DIR" "$CACHE_DIR" "$LOG_DIR"

# Docker ships with the Neuron DLAMI; make sure it runs.
systemctl enable --now docker

# The bundle: download, verify its sha256, unpack (only when it changed).
if [ "$(cat "$ROOT/bundle.sha256" 2>/dev/null || true)" != "$BUNDLE_SHA256" ]; then
  aws s3 cp --only-show-errors --region "$REGION" "$BUNDLE_URL" "$ROOT/bundle.tar.gz"
  echo "$BUNDLE_SHA256  $ROOT/bundle.tar.gz" | sha256sum --check --strict
  rm -rf "$MODEL_DIR.new" && mkdir -p "$MODEL_DIR.new"
  tar -xzf "$ROOT/bundle.tar.gz" -C "$MODEL_DIR.new"
  rm -rf "$MODEL_DIR" && mv "$MODEL_DIR.new" "$MODEL_DIR"
  echo "$BUNDLE_SHA256" > "$ROOT/bundle.sha256"
fi

# The pinned image: log in to its registry and pull it (a no-op when already present).
REGISTRY="${IMAGE_URI%%/*}"
aws ecr get-login-password --region "$REGION" | docker login --username AWS --password-stdin "$REGISTRY"
docker pull "$IMAGE_URI"

# The service's settings, read by the systemd unit.
cat > /etc/default/djl-serving <<ENV
IMAGE_URI=$IMAGE_URI
REGION=$REGION
LOG_GROUP=$LOG_GROUP
PORT=$PORT
MODEL_DIR=$MODEL_DIR
CACHE_DIR=$CACHE_DIR
LOG_DIR=$LOG_DIR
ENV

# The unit and its start script were written by the lines above this script.
systemctl daemon-reload
systemctl enable djl-serving.service
systemctl restart djl-serving.service
