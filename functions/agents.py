"""An agent's heartbeat, spawns, active threads and latest rollup."""

from functions.runtime import http_handler

handler = http_handler("agents")
