-- wrk script: JSON-RPC SendMessage with a fresh messageId per request, to the agent named by
-- the environment variable BENCH_TENANT (empty = the default agent).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["A2A-Version"] = "1.0"

local tenant = os.getenv("BENCH_TENANT") or ""
local counter = 0
-- A global, not a local: `thread:set` assigns the global of each thread's Lua state (a local
-- upvalue would shadow it and give every thread the same messageIds, which are then idempotent
-- retries, not new tasks).
thread_id = 0

function setup(thread)
  thread:set("thread_id", thread_id)
  thread_id = thread_id + 1
end

function request()
  counter = counter + 1
  local body = string.format(
    '{"jsonrpc":"2.0","id":%d,"method":"SendMessage","params":{"tenant":"%s","message":' ..
    '{"messageId":"bench-%d-%d","role":"ROLE_USER","parts":[{"text":"hello"}]}}}',
    counter, tenant, thread_id, counter)
  return wrk.format(nil, nil, nil, body)
end
