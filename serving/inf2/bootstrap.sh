#!/bin/bash
# Setup of the inf2 model server. cloud-init runs it at every boot (the user data asks it
# to), and an operator may run it again at any time: every step converges, so a re-run
# changes only what differs from the settings and never recompiles the model.
# The stack prepends the settings (BUNDLE_URL, BUNDLE_SHA256, IMAGE_URI, REGION, LOG_GROUP,
# PORT, LOAD_TIMEOUT_S), the systemd unit and its scripts (stacks/inf2_ec2.py: render_user_data).
set -euo pipefail
umask 022
exec > >(tee -a /var/log/llm-inference-bootstrap.log) 2>&1
echo "bootstrap: start $(date -u +%FT%TZ)"

: "${BUNDLE_URL:?}" "${BUNDLE_SHA256:?}" "${IMAGE_URI:?}" "${REGION:?}" "${LOG_GROUP:?}" "${PORT:?}" "${LOAD_TIMEOUT_S:?}"

ROOT=/opt/llm-inference
MODEL_DIR="$ROOT/model"
# On the instance's EBS volume: compiled graphs and the split checkpoint survive restarts.
CACHE_DIR="$ROOT/neuron-cache"
LOG_DIR="$ROOT/logs"
ENV_FILE=/etc/default/djl-serving

# One run at a time: a manual re-run must not race the boot-time one.
exec 9>/run/llm-inference-bootstrap.lock
flock --wait 900 9

# retry ATTEMPTS COMMAND...: S3, ECR and the network are often not ready at first boot.
retry() {
  local attempts=$1 n=1
  shift
  until "$@"; do
    if [ "$n" -ge "$attempts" ]; then
      echo "bootstrap: giving up after $n attempts: $*" >&2
      return 1
    fi
    sleep $((n * 10))
    n=$((n + 1))
  done
}

install -d -m 0755 "$ROOT" "$MODEL_DIR" "$CACHE_DIR" "$LOG_DIR"

# 1. The Neuron driver (part of the DLAMI): without devices the container cannot run.
if ! compgen -G "/dev/neuron*" >/dev/null; then
  modprobe neuron || true
fi
if ! compgen -G "/dev/neuron*" >/dev/null; then
  echo "bootstrap: no /dev/neuron* device: use an inf2 instance type and a Neuron DLAMI (inf2.ami_ssm_parameter)" >&2
  exit 1
fi
echo "bootstrap: Neuron driver $(modinfo -F version neuron 2>/dev/null || echo unknown), $(compgen -G "/dev/neuron*" | wc -l) devices"

# 2. Docker and the AWS CLI ship with the Neuron DLAMI.
for tool in docker aws sha256sum curl; do
  command -v "$tool" >/dev/null || { echo "bootstrap: $tool is missing: use a Neuron DLAMI" >&2; exit 1; }
done
systemctl enable --now docker
retry 10 docker info >/dev/null

# 3. The bundle: download, check its sha256 against the stack's, swap it in atomically
#    (only when it changed; a failed download leaves the previous bundle serving).
if [ "$(cat "$ROOT/bundle.sha256" 2>/dev/null || true)" != "$BUNDLE_SHA256" ]; then
  part="$ROOT/bundle.tar.gz.part"
  retry 5 aws s3 cp --only-show-errors --region "$REGION" "$BUNDLE_URL" "$part"
  if ! echo "$BUNDLE_SHA256  $part" | sha256sum --check --strict --quiet; then
    rm -f "$part"
    echo "bootstrap: $BUNDLE_URL does not have sha256 $BUNDLE_SHA256: refusing it" >&2
    exit 1
  fi
  rm -rf "$MODEL_DIR.new" "$MODEL_DIR.old"
  mkdir -p "$MODEL_DIR.new"
  tar -xzf "$part" -C "$MODEL_DIR.new" --no-same-owner
  mv "$MODEL_DIR" "$MODEL_DIR.old"
  mv "$MODEL_DIR.new" "$MODEL_DIR"
  rm -rf "$MODEL_DIR.old"
  mv -f "$part" "$ROOT/bundle.tar.gz"
  echo "$BUNDLE_SHA256" >"$ROOT/bundle.sha256"
  echo "bootstrap: bundle $BUNDLE_SHA256 installed"
fi

# 4. The pinned image: log in to its registry and pull it, unless it is already here.
ecr_login() {
  aws ecr get-login-password --region "$REGION" | docker login --username AWS --password-stdin "${IMAGE_URI%%/*}"
}
if ! docker image inspect "$IMAGE_URI" >/dev/null 2>&1; then
  retry 5 ecr_login
  retry 5 docker pull "$IMAGE_URI"
fi

# 5. The service's settings, read by the unit; written only when they changed.
settings="IMAGE_URI=$IMAGE_URI
REGION=$REGION
LOG_GROUP=$LOG_GROUP
PORT=$PORT
LOAD_TIMEOUT_S=$LOAD_TIMEOUT_S
MODEL_DIR=$MODEL_DIR
CACHE_DIR=$CACHE_DIR
LOG_DIR=$LOG_DIR"
if [ "$(cat "$ENV_FILE" 2>/dev/null || true)" != "$settings" ]; then
  printf '%s\n' "$settings" >"$ENV_FILE.tmp"
  mv -f "$ENV_FILE.tmp" "$ENV_FILE"
fi

# 6. Start the server, or restart it when anything it runs changed. A server that is
#    still loading is left alone: a restart would throw away the compilation.
fingerprint=$(cat /etc/systemd/system/djl-serving.service /usr/local/bin/djl-serving-run \
  /usr/local/bin/djl-serving-wait "$ENV_FILE" "$ROOT/bundle.sha256" | sha256sum)
systemctl daemon-reload
systemctl enable djl-serving.service
state=$(systemctl is-active djl-serving.service || true)
if [ "$(cat "$ROOT/service.fingerprint" 2>/dev/null || true)" != "$fingerprint" ]; then
  systemctl restart --no-block djl-serving.service
elif [ "$state" != active ] && [ "$state" != activating ]; then
  systemctl start --no-block djl-serving.service
fi
echo "$fingerprint" >"$ROOT/service.fingerprint"
echo "bootstrap: done $(date -u +%FT%TZ); follow the load with: journalctl -fu djl-serving"
