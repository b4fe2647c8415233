# Sourced by the action's step scripts. `fail MESSAGE`: the message as a workflow-command error, then exit 1; its
# data is escaped as the runner reads it, so a line break in an input cannot start a command of its own.
fail() {
  local message="$*"
  message=${message//%/%25}
  message=${message//$'\r'/%0D}
  message=${message//$'\n'/%0A}
  echo "::error title=haul action::$message"
  exit 1
}
