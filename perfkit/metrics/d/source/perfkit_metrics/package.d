/**
 * perfkit metrics for D: the kit's uniform Prometheus instrumentation (names, labels, buckets, exposition:
 * perfkit/metrics/SPEC.md), with per-thread shards recorded `@nogc nothrow` and summed at scrape time.
 *
 *     import perfkit_metrics;
 *
 *     auto reg = new Registry;                                           // start-up: register
 *     auto server = reg.httpServer("my_service", ["/items/{id}"]);
 *     reg.freeze(workers);                                               // one shard per worker
 *     server.observeNs(reg.shard(w), route, methodOf(m), status, ns);    // per request, on worker w
 *     writeExposition(reg, sink, negotiate(accept));                     // GET /metrics
 *
 * Modules: `buckets` (the layout and `le` strings), `labels` (method, status class, host, escaping), `shard`
 * (a thread's slots), `registry` (families, series, handles), `sampler` (one call in N), `standard` (the
 * families of SPEC.md), `exposition` (text 0.0.4 and OpenMetrics), `sink` (a C-heap buffer to write into).
 */
module perfkit_metrics;

public import perfkit_metrics.buckets;
public import perfkit_metrics.exposition;
public import perfkit_metrics.labels;
public import perfkit_metrics.registry;
public import perfkit_metrics.sampler;
public import perfkit_metrics.shard;
public import perfkit_metrics.sink;
public import perfkit_metrics.standard;
