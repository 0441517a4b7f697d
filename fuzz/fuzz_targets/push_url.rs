//! Push-notification webhook checks: the allowlist (first line, `A2A_PUSH_ALLOWED_HOSTS`
//! syntax), then a webhook URL checked at creation (the gateway's push-config validation) and
//! its host as a connect-time address. `*` allows everything, so it must.
#![no_main]

use a2a_push::AddressPolicy;
use a2a_types::v1::TaskPushNotificationConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (spec, url) = text.split_once('\n').unwrap_or(("", text));
    let Ok(policy) = AddressPolicy::parse(spec) else {
        return;
    };
    let cfg = TaskPushNotificationConfig {
        url: url.to_owned(),
        ..Default::default()
    };
    let _ = a2a_gateway::fuzzing::push_config(&cfg, "", &policy);
    if let Ok(parsed) = url::Url::parse(url) {
        let allowed = policy.check_url(&parsed).is_ok();
        if let Some(host) = parsed.host_str() {
            let _ = policy.host_allowed(host);
            if let Ok(ip) = host.trim_matches(['[', ']']).parse() {
                let _ = policy.check_addr(host, ip);
            }
        }
        if spec.trim() == "*" {
            assert!(allowed, "* allows {url}");
        }
    }
});
