"""ACMI benchmarks: round trips, latency under RTT, cold start, throughput and contention.

    python -m bench                 # full run: prints the tables, writes bench/results/latest.json
                                    # and the committed bench/RESULTS.md
    python -m bench --quick         # CI smoke: small N, < 60 s, JSON only

Every figure is measured side by side in one run (baselines included), on this machine,
against a redis-server the bench starts itself and the Upstash REST double of
``acmi_core/testing/upstash_double.py``. Quote medians and ratios, not absolute times.
"""
