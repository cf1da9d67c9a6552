"""perfkit: the bench orchestrator behind ``bazel run //perfkit:bench``.

One concept per module:

- ``scenarios``  the registry of declarative scenario files (TOML), validated
- ``procs``      process control: CPU pinning, readiness wait, log capture, clean stop, /proc figures
- ``loadgen``    the perfkit-load engine as a subprocess (closed-loop probe, constant-rate runs)
- ``promtext``   /metrics scraping and hot-path deltas
- ``stats``      medians and spreads over repeats, seeded bootstrap intervals
- ``runner``     the method: warm-up, saturation probe, constant-rate runs, repeats
- ``clients``    client scenarios (a small driver per client library, in its own process)
- ``results``    results.json: building, machine info, schema validation
- ``report_md`` / ``report_html``  the reports
- ``compare``    A vs B: same settings, figures by absolute rate, bootstrap verdicts
- ``paired``     paired A/B of two systems (blocks of rounds, bootstrap intervals)
- ``gate``       a CI check of a paired ratio against a stored baseline
- ``history``    the run index (results/index.jsonl) and the trend of the headline ratios
- ``progress``   the live progress display
- ``cli``        the command line (``bench``, ``compare``, ``paired``, ``gate``, ``trend``, ``--list``, …)
"""

__version__ = "1.0.0"
