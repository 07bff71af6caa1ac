"""The RL cycle: step executions, assessments, improvements, lessons, unassessed steps."""

from functions.runtime import http_handler

handler = http_handler("workflows")
