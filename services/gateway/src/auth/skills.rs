//! Per-skill requirements (`[auth] skill_requirements`): what a caller must meet, beyond the
//! card's requirements, to reach an agent with a given skill. Split from the
//! [`super::Authenticator`] so that the domain service, which checks them when a message is
//! routed, holds this and not the authenticator.

use std::collections::HashMap;

use a2a_types::A2aError;
use a2a_types::v1::SecurityRequirement;

use super::jwt::missing_scopes;
use super::{Principal, Requirements};

pub struct SkillPolicy {
    /// The declared schemes' names, by index (a [`Principal`]'s grants use the same order).
    pub(super) schemes: Vec<String>,
    /// Skill id → what a caller must also meet to reach an agent with that skill.
    pub(super) requirements: HashMap<String, Requirements>,
    /// Skill id → the `securityRequirements` the cards publish on it.
    pub(super) card_requirements: HashMap<String, Vec<SecurityRequirement>>,
}

impl SkillPolicy {
    /// The `securityRequirements` the card publishes on skill `skill` (empty: none of its own).
    pub fn card_requirements(&self, skill: &str) -> Vec<SecurityRequirement> {
        self.card_requirements
            .get(skill)
            .cloned()
            .unwrap_or_default()
    }

    /// Whether `principal` meets the requirements of every one of `skills` that declares some
    /// (the skills of the agent a message goes to); PermissionDenied names what is missing.
    pub fn authorize<'a>(
        &self,
        principal: &Principal,
        skills: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), A2aError> {
        for skill in skills {
            let Some(sets) = self.requirements.get(skill) else {
                continue;
            };
            let met = sets.iter().any(|set| {
                set.iter().all(|(i, scopes)| {
                    principal.grants[*i]
                        .as_ref()
                        .is_some_and(|have| missing_scopes(scopes, have).is_empty())
                })
            });
            if !met {
                let wanted: Vec<String> = sets
                    .iter()
                    .map(|set| {
                        set.iter()
                            .map(|(i, scopes)| match scopes.as_slice() {
                                [] => self.schemes[*i].clone(),
                                _ => format!("{} [{}]", self.schemes[*i], scopes.join(" ")),
                            })
                            .collect::<Vec<_>>()
                            .join(" and ")
                    })
                    .collect();
                return Err(A2aError::PermissionDenied(format!(
                    "skill {skill} requires {}",
                    wanted.join(", or ")
                )));
            }
        }
        Ok(())
    }
}
