//! Which operation a path under `/a2a/rest` names. Paths are matched by hand rather than by the
//! axum router so that the optional `/{tenant}` prefix, the custom verbs (`/tasks/{id}:cancel`)
//! and the 404-versus-405 decision follow the A2A rules:
//!
//! - the un-prefixed reading wins (`/tasks/abc` is task `abc`, not tenant `tasks`);
//! - a custom verb is split off the *raw* last segment at its last `:`, then both halves are
//!   percent-decoded (so `abc%3Ax:cancel` cancels task `abc:x`, and `abc:subscribe` is never a
//!   task id);
//! - a known path with the wrong verb is 405 (with the allowed verbs), anything else 404.

use a2a_types::Method as A2aMethod;
use axum::http::Method;

/// One A2A operation with the identifiers its path carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    SendMessage,
    SendStreamingMessage,
    GetTask { id: String },
    ListTasks,
    CancelTask { id: String },
    SubscribeToTask { id: String },
    CreatePushConfig { task_id: String },
    GetPushConfig { task_id: String, id: String },
    ListPushConfigs { task_id: String },
    DeletePushConfig { task_id: String, id: String },
    GetExtendedAgentCard,
}

impl Op {
    /// The A2A method of the route.
    pub fn method(&self) -> A2aMethod {
        match self {
            Op::SendMessage => A2aMethod::SendMessage,
            Op::SendStreamingMessage => A2aMethod::SendStreamingMessage,
            Op::GetTask { .. } => A2aMethod::GetTask,
            Op::ListTasks => A2aMethod::ListTasks,
            Op::CancelTask { .. } => A2aMethod::CancelTask,
            Op::SubscribeToTask { .. } => A2aMethod::SubscribeToTask,
            Op::CreatePushConfig { .. } => A2aMethod::CreateTaskPushNotificationConfig,
            Op::GetPushConfig { .. } => A2aMethod::GetTaskPushNotificationConfig,
            Op::ListPushConfigs { .. } => A2aMethod::ListTaskPushNotificationConfigs,
            Op::DeletePushConfig { .. } => A2aMethod::DeleteTaskPushNotificationConfig,
            Op::GetExtendedAgentCard => A2aMethod::GetExtendedAgentCard,
        }
    }
}

impl Op {
    /// The path template under the prefix (`http.route` of the SERVER span).
    pub fn route(&self) -> &'static str {
        match self {
            Op::SendMessage => "/message:send",
            Op::SendStreamingMessage => "/message:stream",
            Op::GetTask { .. } => "/tasks/{id}",
            Op::ListTasks => "/tasks",
            Op::CancelTask { .. } => "/tasks/{id}:cancel",
            Op::SubscribeToTask { .. } => "/tasks/{id}:subscribe",
            Op::CreatePushConfig { .. } | Op::ListPushConfigs { .. } => {
                "/tasks/{id}/pushNotificationConfigs"
            }
            Op::GetPushConfig { .. } | Op::DeletePushConfig { .. } => {
                "/tasks/{id}/pushNotificationConfigs/{configId}"
            }
            Op::GetExtendedAgentCard => "/extendedAgentCard",
        }
    }
}

/// A matched request: the tenant of the `/{tenant}` prefix (empty without one) and the operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub tenant: String,
    pub op: Op,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoRoute {
    NotFound,
    MethodNotAllowed(&'static [Method]),
}

/// A path (method-independent) and the operation each verb selects on it.
enum Resource {
    Send,
    Stream,
    Tasks,
    Task(String),
    Cancel(String),
    Subscribe(String),
    PushConfigs(String),
    PushConfig(String, String),
    ExtendedCard,
}

const GET: &[Method] = &[Method::GET];
const POST: &[Method] = &[Method::POST];
const GET_POST: &[Method] = &[Method::GET, Method::POST];
const GET_DELETE: &[Method] = &[Method::GET, Method::DELETE];

/// Resolves `path` (the request path, still percent-encoded, starting with `prefix`).
pub fn resolve(method: &Method, prefix: &str, path: &str) -> Result<Route, NoRoute> {
    let rest = path.strip_prefix(prefix).ok_or(NoRoute::NotFound)?;
    let rest = rest.strip_prefix('/').unwrap_or(rest);
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let segs: Vec<&str> = rest.split('/').collect();
    let (tenant, resource) = match resource(&segs) {
        Some(r) => (String::new(), r),
        None => {
            let (first, tail) = segs.split_first().ok_or(NoRoute::NotFound)?;
            let tenant = decode(first).filter(|t| !t.is_empty());
            match (tenant, resource(tail)) {
                (Some(t), Some(r)) => (t, r),
                _ => return Err(NoRoute::NotFound),
            }
        }
    };
    let op = select(method, resource)?;
    Ok(Route { tenant, op })
}

/// The 0.3 reading of `path`, if it has one: `/v1/…` under the prefix (or under
/// `/{tenant}/v1/…`, the tenant of a per-agent card's 0.3 interface), with the 0.3 names
/// (`/v1/card` is the extended card; 0.3 has no ListTasks). `None` when the path is not a 0.3
/// path; a 0.3 path with the wrong verb is 405.
///
/// The same path read as 1.0 is tenant `v1` ([`resolve`]): `A2A-Version` decides between the
/// two (README, *A2A 0.3 clients*).
pub fn resolve_v03(method: &Method, prefix: &str, path: &str) -> Option<Result<Route, NoRoute>> {
    let rest = path.strip_prefix(prefix)?;
    let rest = rest.strip_prefix('/').unwrap_or(rest);
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let segs: Vec<&str> = rest.split('/').collect();
    let (tenant, tail) = match segs.as_slice() {
        ["v1", tail @ ..] => (String::new(), tail),
        [tenant, "v1", tail @ ..] => (decode(tenant).filter(|t| !t.is_empty())?, tail),
        _ => return None,
    };
    let resource = match tail {
        ["card"] => Resource::ExtendedCard,
        ["tasks"] | ["extendedAgentCard"] => return None,
        other => resource(other)?,
    };
    Some(select(method, resource).map(|op| Route { tenant, op }))
}

fn resource(segs: &[&str]) -> Option<Resource> {
    Some(match segs {
        ["message:send"] => Resource::Send,
        ["message:stream"] => Resource::Stream,
        ["tasks"] => Resource::Tasks,
        ["extendedAgentCard"] => Resource::ExtendedCard,
        ["tasks", last] => match last.rsplit_once(':') {
            None => Resource::Task(decode(last)?),
            Some((id, "cancel")) => Resource::Cancel(decode(id)?),
            Some((id, "subscribe")) => Resource::Subscribe(decode(id)?),
            Some(_) => return None,
        },
        ["tasks", task, "pushNotificationConfigs"] => Resource::PushConfigs(decode(task)?),
        ["tasks", task, "pushNotificationConfigs", id] => {
            Resource::PushConfig(decode(task)?, decode(id)?)
        }
        _ => return None,
    })
}

fn select(method: &Method, resource: Resource) -> Result<Op, NoRoute> {
    let m = method.clone();
    let (op, allowed) = match resource {
        Resource::Send => ((m == Method::POST).then_some(Op::SendMessage), POST),
        Resource::Stream => (
            (m == Method::POST).then_some(Op::SendStreamingMessage),
            POST,
        ),
        Resource::Tasks => ((m == Method::GET).then_some(Op::ListTasks), GET),
        Resource::ExtendedCard => ((m == Method::GET).then_some(Op::GetExtendedAgentCard), GET),
        Resource::Task(id) => ((m == Method::GET).then_some(Op::GetTask { id }), GET),
        Resource::Cancel(id) => ((m == Method::POST).then_some(Op::CancelTask { id }), POST),
        Resource::Subscribe(id) => (
            (m == Method::GET || m == Method::POST).then_some(Op::SubscribeToTask { id }),
            GET_POST,
        ),
        Resource::PushConfigs(task_id) => (
            match m {
                Method::GET => Some(Op::ListPushConfigs { task_id }),
                Method::POST => Some(Op::CreatePushConfig { task_id }),
                _ => None,
            },
            GET_POST,
        ),
        Resource::PushConfig(task_id, id) => (
            match m {
                Method::GET => Some(Op::GetPushConfig { task_id, id }),
                Method::DELETE => Some(Op::DeletePushConfig { task_id, id }),
                _ => None,
            },
            GET_DELETE,
        ),
    };
    op.ok_or(NoRoute::MethodNotAllowed(allowed))
}

/// Percent-decodes one path segment (`+` stays a plus); `None` if the result is not UTF-8 or an
/// escape is malformed.
fn decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            // Two hex digits exactly: `from_str_radix` alone would take `%+1` as byte 1.
            let hex = segment.get(i + 1..i + 3)?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "/a2a/rest";

    fn ok(method: Method, path: &str) -> (String, Op) {
        let r = resolve(&method, P, path).unwrap_or_else(|e| panic!("{path}: {e:?}"));
        (r.tenant, r.op)
    }

    fn id(s: &str) -> String {
        s.to_owned()
    }

    #[test]
    fn every_operation_with_and_without_a_tenant() {
        let cases = [
            (Method::POST, "/message:send", Op::SendMessage),
            (Method::POST, "/message:stream", Op::SendStreamingMessage),
            (Method::GET, "/tasks", Op::ListTasks),
            (Method::GET, "/tasks/t1", Op::GetTask { id: id("t1") }),
            (
                Method::POST,
                "/tasks/t1:cancel",
                Op::CancelTask { id: id("t1") },
            ),
            (
                Method::GET,
                "/tasks/t1:subscribe",
                Op::SubscribeToTask { id: id("t1") },
            ),
            (
                Method::POST,
                "/tasks/t1:subscribe",
                Op::SubscribeToTask { id: id("t1") },
            ),
            (
                Method::POST,
                "/tasks/t1/pushNotificationConfigs",
                Op::CreatePushConfig { task_id: id("t1") },
            ),
            (
                Method::GET,
                "/tasks/t1/pushNotificationConfigs",
                Op::ListPushConfigs { task_id: id("t1") },
            ),
            (
                Method::GET,
                "/tasks/t1/pushNotificationConfigs/c1",
                Op::GetPushConfig {
                    task_id: id("t1"),
                    id: id("c1"),
                },
            ),
            (
                Method::DELETE,
                "/tasks/t1/pushNotificationConfigs/c1",
                Op::DeletePushConfig {
                    task_id: id("t1"),
                    id: id("c1"),
                },
            ),
            (Method::GET, "/extendedAgentCard", Op::GetExtendedAgentCard),
        ];
        for (method, path, op) in cases {
            assert_eq!(
                ok(method.clone(), &format!("{P}{path}")),
                (String::new(), op.clone())
            );
            assert_eq!(
                ok(method, &format!("{P}/scenario{path}")),
                (id("scenario"), op)
            );
        }
        assert_eq!(
            ok(Method::GET, "/a2a/rest/tasks/"),
            (String::new(), Op::ListTasks)
        );
    }

    #[test]
    fn segments_are_decoded_after_the_verb_is_split() {
        assert_eq!(
            ok(Method::POST, "/a2a/rest/tasks/a%3Ab:cancel"),
            (String::new(), Op::CancelTask { id: id("a:b") })
        );
        assert_eq!(
            ok(Method::GET, "/a2a/rest/my%20tenant/tasks/x%2Fy"),
            (id("my tenant"), Op::GetTask { id: id("x/y") })
        );
        // The un-prefixed reading wins.
        assert_eq!(
            ok(Method::GET, "/a2a/rest/tasks/tasks"),
            (String::new(), Op::GetTask { id: id("tasks") })
        );
        assert_eq!(
            ok(Method::GET, "/a2a/rest/tasks/tasks/t"),
            (id("tasks"), Op::GetTask { id: id("t") })
        );
    }

    /// Found while writing the rest_request fuzz target: a sign is not a hex digit.
    #[test]
    fn escapes_are_two_hex_digits() {
        assert_eq!(decode("a%41"), Some("aA".into()));
        for bad in ["%+1", "%-1", "%4", "%zz", "%"] {
            assert_eq!(decode(bad), None, "{bad}");
        }
        assert_eq!(
            resolve(&Method::GET, P, "/a2a/rest/tasks/%+1"),
            Err(NoRoute::NotFound)
        );
    }

    #[test]
    fn v03_paths_and_their_1_0_reading() {
        let v03 = |m: Method, path: &str| resolve_v03(&m, P, path);
        assert_eq!(
            v03(Method::POST, "/a2a/rest/v1/message:send"),
            Some(Ok(Route {
                tenant: String::new(),
                op: Op::SendMessage
            }))
        );
        assert_eq!(
            v03(Method::GET, "/a2a/rest/v1/card"),
            Some(Ok(Route {
                tenant: String::new(),
                op: Op::GetExtendedAgentCard
            }))
        );
        assert_eq!(
            v03(Method::GET, "/a2a/rest/echo/v1/tasks/t1"),
            Some(Ok(Route {
                tenant: id("echo"),
                op: Op::GetTask { id: id("t1") }
            }))
        );
        assert_eq!(
            v03(Method::GET, "/a2a/rest/v1/message:send"),
            Some(Err(NoRoute::MethodNotAllowed(POST)))
        );
        for not_03 in [
            "/a2a/rest/message:send",
            "/a2a/rest/v1/tasks",
            "/a2a/rest/v1/extendedAgentCard",
            "/a2a/rest/v1/nope",
        ] {
            assert_eq!(v03(Method::GET, not_03), None, "{not_03}");
        }
        // Read as 1.0, the same path is tenant `v1`.
        assert_eq!(
            ok(Method::POST, "/a2a/rest/v1/message:send"),
            (id("v1"), Op::SendMessage)
        );
    }

    #[test]
    fn unknown_paths_and_wrong_verbs() {
        for path in [
            "/a2a/rest",
            "/a2a/rest/",
            "/a2a/rest/nope",
            "/a2a/rest/message:fly",
            "/a2a/rest/tasks/t:fly",
            "/a2a/rest/t/u/v/w/x/y",
            "/a2a/rest//tasks",
            "/a2a/rest/tasks/%zz",
        ] {
            assert_eq!(
                resolve(&Method::GET, P, path),
                Err(NoRoute::NotFound),
                "{path}"
            );
        }
        assert_eq!(
            resolve(&Method::GET, P, "/a2a/rest/message:send"),
            Err(NoRoute::MethodNotAllowed(POST))
        );
        assert_eq!(
            resolve(&Method::DELETE, P, "/a2a/rest/ten/tasks/t1"),
            Err(NoRoute::MethodNotAllowed(GET))
        );
        assert_eq!(
            resolve(
                &Method::PUT,
                P,
                "/a2a/rest/tasks/t/pushNotificationConfigs/c"
            ),
            Err(NoRoute::MethodNotAllowed(GET_DELETE))
        );
    }
}
