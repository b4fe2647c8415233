#!/usr/bin/env bash
# Runs `haul sync MANIFEST ARGS…`; haul itself writes the annotations and the step summary. Its exit status is the
# step's, and the exit-code output.
set -euo pipefail
# Split at whitespace, without globbing or quote handling: the text is the workflow's, not a shell's.
read -r -a args <<< "$HAUL_ARGS"
if [ "$HAUL_USE_CACHE" = true ]; then
  export HAUL_CACHE=$HAUL_CACHE_FOLDER
fi
status=0
"$HAUL_BINARY" sync "$HAUL_MANIFEST" "${args[@]}" || status=$?
echo "exit-code=$status" >> "$GITHUB_OUTPUT"
exit "$status"
