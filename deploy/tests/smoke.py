"""The smoke sequence a deployment must pass, through its load balancer: every binding, a stream
resumed on the other replica with Last-Event-ID, and a push delivered by the worker."""

import base64
import http.client
import http.server
import json
import threading
import time
import uuid

import grpc

H = {"Content-Type": "application/json", "A2A-Version": "1.0"}
REPLICA = "X-A2A-Replica"  # set by deploy/haproxy/haproxy.cfg: the server that answered


def request(port: int, method: str, path: str, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.request(method, path, body=None if body is None else json.dumps(body), headers={**H, **(headers or {})})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, resp.getheader(REPLICA), json.loads(data) if data else None


def message(text: str) -> dict:
    return {"messageId": f"deploy-{uuid.uuid4()}", "role": "ROLE_USER", "parts": [{"text": text}]}


def jsonrpc(port: int, method: str, params: dict):
    status, replica, body = request(port, "POST", "/a2a/jsonrpc", {"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert status == 200 and "result" in body, (status, body)
    return body["result"], replica


# --- gRPC without generated code: the few protobuf fields the smoke needs, by number
# (proto/lf/a2a/v1/a2a.proto).

def _varint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def _ld(num: int, payload: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _fields(buf: bytes) -> dict[int, list]:
    out, i = {}, 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(buf, i)
        elif wire == 2:
            n, i = _read_varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        out.setdefault(num, []).append(value)
    return out


def _read_varint(buf: bytes, i: int):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, i


COMPLETED = 3  # TaskState.TASK_STATE_COMPLETED


def _task(buf: bytes) -> tuple[str, int]:
    """(id, state) of a Task message."""
    f = _fields(buf)
    status = _fields(f[3][0])
    return f[1][0].decode(), status.get(1, [0])[0]


def grpc_send_and_get(port: int, other_task: str) -> str:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        md = (("a2a-version", "1.0"),)
        send = channel.unary_unary("/lf.a2a.v1.A2AService/SendMessage")
        part = _ld(1, b"hello over grpc")
        msg = _ld(1, f"deploy-{uuid.uuid4()}".encode()) + _varint(4 << 3) + _varint(1) + _ld(5, part)
        reply = send(_ld(2, msg), metadata=md, timeout=20)
        task_id, state = _task(_fields(reply)[1][0])
        assert state == COMPLETED, state
        get = channel.unary_unary("/lf.a2a.v1.A2AService/GetTask")
        got_id, state = _task(get(_ld(2, other_task.encode()), metadata=md, timeout=20))
        assert (got_id, state) == (other_task, COMPLETED), (got_id, state)
        return task_id


# --- SSE

def sse_events(resp, limit: int | None = None):
    """(id, data) of each SSE event of `resp`, until it ends or `limit` events were read."""
    n, event_id, data = 0, None, []
    while limit is None or n < limit:
        line = resp.readline()
        if not line:
            return
        line = line.decode().rstrip("\r\n")
        if line.startswith("id:"):
            event_id = int(line[3:].strip())
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            yield event_id, json.loads("\n".join(data))
            n, event_id, data = n + 1, None, []


def stream_then_resume_elsewhere(port: int) -> dict:
    """A SendStreamingMessage on one replica, broken after its first event, resumed with
    Last-Event-ID on the other replica (through the balancer); the events add up."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.request("POST", "/a2a/jsonrpc", body=json.dumps({"jsonrpc": "2.0", "id": 7, "method": "SendStreamingMessage",
                                                          "params": {"message": message("stream me")}}), headers=H)
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type", "").startswith("text/event-stream"), resp.status
    first_replica = resp.getheader(REPLICA)
    (first_id, first), = list(sse_events(resp, limit=1))
    task_id = first["result"]["task"]["id"]
    conn.close()  # the client breaks off after the first event
    for _ in range(6):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        conn.request("POST", f"/a2a/rest/tasks/{task_id}:subscribe", headers={**H, "Last-Event-ID": str(first_id)})
        resp = conn.getresponse()
        if resp.getheader(REPLICA) != first_replica:
            break
        conn.close()
    else:
        raise AssertionError(f"the balancer never sent the resume away from {first_replica}")
    assert resp.status == 200, (resp.status, resp.read())
    rest = list(sse_events(resp))
    conn.close()
    ids = [i for i, _ in rest]
    assert ids and ids == list(range(first_id + 1, first_id + 1 + len(ids))), ids
    last = rest[-1][1]
    assert last["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED", last
    return {"task": task_id, "first_replica": first_replica, "resumed_on": resp.getheader(REPLICA),
            "events": [first_id] + ids}


# --- push

class Receiver:
    """A webhook on loopback that records every POST."""

    def __init__(self):
        self.posts: list[tuple[dict, dict]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.posts.append((dict(self.headers), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def push_delivered(port: int, receiver: Receiver, kid: str, timeout: float = 20) -> dict:
    url = f"http://127.0.0.1:{receiver.port}/hook"
    result, _ = jsonrpc(port, "SendMessage", {"message": message("push me"),
                                              "configuration": {"taskPushNotificationConfig": {"url": url, "token": "deploy-token"}}})
    task_id = result["task"]["id"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        mine = [(h, b) for h, b in receiver.posts if json.dumps(b).find(task_id) >= 0]
        done = [b for _, b in mine if b.get("statusUpdate", {}).get("status", {}).get("state") == "TASK_STATE_COMPLETED"
                or b.get("task", {}).get("status", {}).get("state") == "TASK_STATE_COMPLETED"]
        if done:
            headers = {k.lower(): v for k, v in mine[0][0].items()}
            assert headers["x-a2a-notification-token"] == "deploy-token"
            jwt_header = json.loads(base64.urlsafe_b64decode(headers["x-a2a-push-signature"].split(".")[0] + "=="))
            assert jwt_header["kid"] == kid, (jwt_header, kid)
            return {"task": task_id, "posts": len(mine), "kid": jwt_header["kid"]}
        time.sleep(0.1)
    raise AssertionError(f"no push for task {task_id} within {timeout}s (got {len(receiver.posts)} posts)")


def sequence(port: int, kid: str) -> dict:
    """The whole smoke sequence through the balancer on `port`; what it saw."""
    status, _, card = request(port, "GET", "/.well-known/agent-card.json")
    assert status == 200 and card["supportedInterfaces"], card
    result, replica = jsonrpc(port, "SendMessage", {"message": message("hello over json-rpc")})
    task = result["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    replicas = {replica}
    status, replica, got = request(port, "GET", f"/a2a/rest/tasks/{task['id']}")
    assert status == 200 and got["id"] == task["id"], (status, got)
    replicas.add(replica)
    grpc_task = grpc_send_and_get(port, task["id"])
    stream = stream_then_resume_elsewhere(port)
    receiver = Receiver()
    try:
        push = push_delivered(port, receiver, kid)
    finally:
        receiver.close()
    replicas |= {stream["first_replica"], stream["resumed_on"]}
    assert len(replicas) == 2, replicas
    return {"jsonrpc_task": task["id"], "grpc_task": grpc_task, "stream": stream, "push": push,
            "replicas": sorted(replicas)}
