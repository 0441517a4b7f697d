//! Push-notification config CRUD. Delivery is `a2a-delivery`'s job (in `a2a-worker`, or in this
//! process in embedded mode, see `app::build`); this stores what it reads.

use a2a_types::A2aError;
use a2a_types::v1::{
    DeleteTaskPushNotificationConfigRequest, GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    TaskPushNotificationConfig,
};

use super::{A2aService, RequestContext, store_error, validate};

const DEFAULT_PAGE_SIZE: i32 = 50;
const MAX_PAGE_SIZE: i32 = 100;

impl A2aService {
    pub(crate) fn require_push(&self) -> Result<(), A2aError> {
        if self.inner.config.push_notifications {
            Ok(())
        } else {
            Err(A2aError::PushNotificationNotSupported)
        }
    }

    /// `[limits.quotas]`'s push-config bounds, which the store checks as it inserts.
    pub(crate) fn push_quota(&self) -> a2a_store::PushQuota {
        let q = self.inner.quotas.config();
        a2a_store::PushQuota {
            per_task: q.push_configs_per_task,
            per_owner: q.push_configs_per_owner,
        }
    }

    pub async fn create_push_config(
        &self,
        ctx: &RequestContext,
        mut cfg: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        self.require_push()?;
        validate::required_id(&cfg.task_id, "taskId")?;
        validate::push_config(&cfg, "", &self.inner.config.push_policy)?;
        if cfg.id.is_empty() {
            cfg.id = uuid::Uuid::now_v7().to_string();
        }
        cfg.tenant.clear();
        let task_id = cfg.task_id.clone();
        self.inner
            .store
            .put_push_config(&ctx.owner, cfg, ctx.dialect, self.push_quota())
            .await
            .map_err(|e| store_error(&task_id, e))
    }

    pub async fn get_push_config(
        &self,
        ctx: &RequestContext,
        req: GetTaskPushNotificationConfigRequest,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        self.require_push()?;
        validate::required_id(&req.task_id, "taskId")?;
        validate::required_id(&req.id, "id")?;
        self.inner
            .store
            .get_push_config(&ctx.owner, &req.task_id, &req.id)
            .await
            .map_err(|e| store_error(&req.task_id, e))?
            .ok_or_else(|| A2aError::task_not_found(&req.task_id))
    }

    pub async fn list_push_configs(
        &self,
        ctx: &RequestContext,
        req: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, A2aError> {
        self.require_push()?;
        validate::required_id(&req.task_id, "taskId")?;
        let page_size = match req.page_size {
            0 => DEFAULT_PAGE_SIZE,
            n if (1..=MAX_PAGE_SIZE).contains(&n) => n,
            _ => {
                return Err(A2aError::invalid_params(
                    "pageSize",
                    format!("must be between 1 and {MAX_PAGE_SIZE}"),
                ));
            }
        };
        let page = self
            .inner
            .store
            .list_push_configs(
                &ctx.owner,
                &req.task_id,
                page_size as usize,
                &req.page_token,
            )
            .await
            .map_err(|e| store_error(&req.task_id, e))?;
        Ok(ListTaskPushNotificationConfigsResponse {
            configs: page.configs,
            next_page_token: page.next_page_token,
        })
    }

    pub async fn delete_push_config(
        &self,
        ctx: &RequestContext,
        req: DeleteTaskPushNotificationConfigRequest,
    ) -> Result<(), A2aError> {
        self.require_push()?;
        validate::required_id(&req.task_id, "taskId")?;
        validate::required_id(&req.id, "id")?;
        self.inner
            .store
            .delete_push_config(&ctx.owner, &req.task_id, &req.id)
            .await
            .map_err(|e| store_error(&req.task_id, e))
    }
}
