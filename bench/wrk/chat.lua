-- wrk -s bench/wrk/chat.lua URL: POST a non-streaming chat completion for
-- model "fast" (the model bench/gateway.sh's mock script and gateway route
-- define). Used for a cross-check of bench_loadgen's req/s.
wrk.method = "POST"
wrk.path = "/v1/chat/completions"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer bench"
wrk.body = '{"model":"fast","messages":[{"role":"user","content":"Say hello to the benchmark."}]}'
