-- wrk script: JSON-RPC SendMessage to the echo agent, a fresh messageId per request.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["A2A-Version"] = "1.0"
-- loadtest/bench-auth.sh sets BENCH_TOKEN to measure authenticated requests.
local token = os.getenv("BENCH_TOKEN")
if token and token ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. token
end

-- loadtest/bench-postgres.sh sets BENCH_IDEMPOTENCY=1 to send a fresh Idempotency-Key with
-- every request (what a client that retries safely pays).
local keyed = os.getenv("BENCH_IDEMPOTENCY") == "1"

local counter = 0
-- A global, not a local: `thread:set` assigns the global of each thread's Lua state, and a local
-- upvalue would shadow it, giving every thread the same ids (duplicate messageIds are idempotent
-- retries, not new tasks).
thread_id = 0

function setup(thread)
  thread:set("thread_id", thread_id)
  thread_id = thread_id + 1
end

function request()
  counter = counter + 1
  local body = string.format(
    '{"jsonrpc":"2.0","id":%d,"method":"SendMessage","params":{"message":' ..
    '{"messageId":"bench-%d-%d","role":"ROLE_USER","parts":[{"text":"hello"}]}}}',
    counter, thread_id, counter)
  if not keyed then
    return wrk.format(nil, nil, nil, body)
  end
  local headers = {}
  for k, v in pairs(wrk.headers) do headers[k] = v end
  headers["Idempotency-Key"] = string.format("key-%d-%d", thread_id, counter)
  return wrk.format(nil, nil, headers, body)
end
