#!/bin/bash
# Setup of the inf2 model server. cloud-init runs it at every boot (the user data asks it
# to), and an operator may run it again at any time: every step converges, so a re-run
# changes only what differs from the settings and never recompiles the model.
# The stack prepends the settings (BUNDLE_URL, BUNDLE_SHA256, IMAGE_URI, REGION, LOG_GROUP,
# PORT, LOAD_TIMEOUT_S, PUBLISH_ADDRESS, NAMESPACE, PROBE_REQUEST), the systemd units and their
# scripts (llm_inference_cdk/inf2/server.py).
# Every path it touches can be moved by a BOOTSTRAP_* variable; the defaults are the
# instance's, and the stack sets none of them (tests/inf2/test_bootstrap_run.py runs the
# script in a temporary folder that way).
set -euo pipefail
umask 022
ROOT=${BOOTSTRAP_ROOT:-/opt/llm-inference}
ENV_FILE=${BOOTSTRAP_ENV_FILE:-/etc/default/djl-serving}
LOCK_FILE=${BOOTSTRAP_LOCK_FILE:-/run/llm-inference-bootstrap.lock}
LOG_FILE=${BOOTSTRAP_LOG_FILE:-/var/log/llm-inference-bootstrap.log}
UNIT_FILE=${BOOTSTRAP_UNIT_FILE:-/etc/systemd/system/djl-serving.service}
RUN_SCRIPT=${BOOTSTRAP_RUN_SCRIPT:-/usr/local/bin/djl-serving-run}
WAIT_SCRIPT=${BOOTSTRAP_WAIT_SCRIPT:-/usr/local/bin/djl-serving-wait}
NEURON_DEVICES=${BOOTSTRAP_NEURON_DEVICES:-/dev/neuron*}
RETRY_DELAY_S=${BOOTSTRAP_RETRY_DELAY_S:-10}
METRICS_ENV_FILE=${BOOTSTRAP_METRICS_ENV_FILE:-/etc/default/llm-inference-metrics}
METRICS_SCRIPT=${BOOTSTRAP_METRICS_SCRIPT:-/usr/local/bin/neuron-metrics}
METRICS_UNIT_FILE=${BOOTSTRAP_METRICS_UNIT_FILE:-/etc/systemd/system/neuron-metrics.service}
# Where cloud-init records the instance id (from the instance metadata): the metrics' dimension.
INSTANCE_ID_FILE=${BOOTSTRAP_INSTANCE_ID_FILE:-/var/lib/cloud/data/instance-id}
exec > >(tee -a "$LOG_FILE") 2>&1
echo "bootstrap: start $(date -u +%FT%TZ)"

: "${BUNDLE_URL:?}" "${BUNDLE_SHA256:?}" "${IMAGE_URI:?}" "${REGION:?}" "${LOG_GROUP:?}" "${PORT:?}" "${LOAD_TIMEOUT_S:?}"
: "${PUBLISH_ADDRESS:?}" "${NAMESPACE:?}" "${PROBE_REQUEST:?}"

MODEL_DIR="$ROOT/model"
# On the instance's EBS volume: compiled graphs and the split checkpoint survive restarts.
CACHE_DIR="$ROOT/neuron-cache"
LOG_DIR="$ROOT/logs"

# One run at a time: a manual re-run must not race the boot-time one.
exec 9>"$LOCK_FILE"
flock --wait 900 9

INSTANCE_ID=$(cat "$INSTANCE_ID_FILE" 2>/dev/null || true)
if [[ ! "$INSTANCE_ID" =~ ^i-[0-9a-f]+$ ]]; then
  echo "bootstrap: no instance id in $INSTANCE_ID_FILE (cloud-init writes it at boot)" >&2
  exit 1
fi

# 0. The health check (a timer, every minute), the Neuron metrics and the shipping of this log
#    to CloudWatch Logs (a timer, every minute: stream bootstrap-<instance id> of LOG_GROUP), with
#    their own settings, before anything that may fail or take long: the host reports
#    ServerHealthy 0 from its first minute, through the download, the pull and the load, and when
#    a later step fails, so that the health alarm fires rather than waits for a first report
#    (Inf2Server.health_alarm), and the reason reaches the dashboard's log widget.
#    A change there restarts the metrics, never the server.
install -d -m 0755 "$ROOT"
printf '%s' "$PROBE_REQUEST" >"$ROOT/probe-request.json.tmp"
mv -f "$ROOT/probe-request.json.tmp" "$ROOT/probe-request.json"
metrics="REGION=$REGION
NAMESPACE=$NAMESPACE
INSTANCE_ID=$INSTANCE_ID
PORT=$PORT
PROBE_FILE=$ROOT/probe-request.json
LOG_GROUP=$LOG_GROUP
BOOTSTRAP_LOG=$LOG_FILE"
if [ "$(cat "$METRICS_ENV_FILE" 2>/dev/null || true)" != "$metrics" ]; then
  printf '%s\n' "$metrics" >"$METRICS_ENV_FILE.tmp"
  mv -f "$METRICS_ENV_FILE.tmp" "$METRICS_ENV_FILE"
fi
monitoring=$(cat "$METRICS_ENV_FILE" "$METRICS_SCRIPT" "$METRICS_UNIT_FILE" | sha256sum)
systemctl daemon-reload
systemctl enable --now djl-serving-health.timer neuron-metrics.service llm-inference-bootstrap-log.timer
if [ "$(cat "$ROOT/monitoring.fingerprint" 2>/dev/null || true)" != "$monitoring" ]; then
  systemctl restart neuron-metrics.service
fi
echo "$monitoring" >"$ROOT/monitoring.fingerprint"

# retry ATTEMPTS COMMAND...: S3, ECR and the network are often not ready at first boot.
retry() {
  local attempts=$1 n=1
  shift
  until "$@"; do
    if [ "$n" -ge "$attempts" ]; then
      echo "bootstrap: giving up after $n attempts: $*" >&2
      return 1
    fi
    sleep $((n * RETRY_DELAY_S))
    n=$((n + 1))
  done
}

# What a run killed in step 3 left behind: the previous bundle goes back in place if the
# swap stopped between its two renames, partial downloads and extractions go. A previous
# bundle beside a complete new one may still be mounted by the server: it goes after step 6.
if [ ! -e "$MODEL_DIR" ] && [ -d "$MODEL_DIR.old" ]; then
  mv "$MODEL_DIR.old" "$MODEL_DIR"
fi
rm -rf "$MODEL_DIR.new" "$ROOT/bundle.tar.gz.part"
install -d -m 0755 "$ROOT" "$MODEL_DIR" "$CACHE_DIR" "$LOG_DIR"

# 1. The Neuron driver (part of the DLAMI): without devices the container cannot run.
if ! compgen -G "$NEURON_DEVICES" >/dev/null; then
  modprobe neuron || true
fi
if ! compgen -G "$NEURON_DEVICES" >/dev/null; then
  echo "bootstrap: no $NEURON_DEVICES device: use an inf2 instance type and a Neuron DLAMI (inf2.ami_ssm_parameter)" >&2
  exit 1
fi
echo "bootstrap: Neuron driver $(modinfo -F version neuron 2>/dev/null || echo unknown), $(compgen -G "$NEURON_DEVICES" | wc -l) devices"

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
    got=$(sha256sum "$part" | cut -d' ' -f1)
    rm -f "$part"
    echo "bootstrap: sha256 mismatch: $BUNDLE_URL has sha256 $got, the stack expects $BUNDLE_SHA256:" \
      "refusing it (the previous bundle stays in $MODEL_DIR)" >&2
    exit 1
  fi
  mkdir -p "$MODEL_DIR.new"
  tar -xzf "$part" -C "$MODEL_DIR.new" --no-same-owner
  # From here until the new sha256 is written the folders do not match any recorded bundle: a
  # run killed in between downloads again instead of trusting what it finds.
  rm -f "$ROOT/bundle.sha256"
  # The running server has the current folder mounted: it becomes .old and is deleted only once
  # the restart below has been asked for, so a failure in between (the image pull) leaves that
  # server its files. An .old still here means that such a failure happened: the server still
  # runs on .old, and the current folder, never served, is the one to drop.
  if [ -d "$MODEL_DIR.old" ]; then
    rm -rf "$MODEL_DIR"
  else
    mv "$MODEL_DIR" "$MODEL_DIR.old"
  fi
  mv "$MODEL_DIR.new" "$MODEL_DIR"
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
PUBLISH_ADDRESS=$PUBLISH_ADDRESS
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
fingerprint=$(cat "$UNIT_FILE" "$RUN_SCRIPT" "$WAIT_SCRIPT" "$ENV_FILE" "$ROOT/bundle.sha256" | sha256sum)
systemctl daemon-reload
systemctl enable djl-serving.service
state=$(systemctl is-active djl-serving.service || true)
if [ "$(cat "$ROOT/service.fingerprint" 2>/dev/null || true)" != "$fingerprint" ]; then
  systemctl restart --no-block djl-serving.service
elif [ "$state" != active ] && [ "$state" != activating ]; then
  systemctl start --no-block djl-serving.service
fi
echo "$fingerprint" >"$ROOT/service.fingerprint"
# The old server is stopping now (or has stopped); it read its model at load.
rm -rf "$MODEL_DIR.old"

echo "bootstrap: done $(date -u +%FT%TZ); follow the load with: journalctl -fu djl-serving"
