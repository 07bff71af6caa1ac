"""Every 15 minutes: a fresh rollup:latest for each entity whose timeline changed."""

from functions.runtime import job_handler

handler = job_handler("rollup-cron")
