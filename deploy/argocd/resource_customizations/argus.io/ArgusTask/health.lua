-- Argo CD health of an ArgusTask (argus.io/v1alpha1). Install: docs/argocd.md.
--   Succeeded                    -> Healthy
--   Failed, Rejected             -> Degraded (with the operator's status.message)
--   Stopped (cancelled)          -> Degraded, as Argo CD's own Workflow check treats a stopped
--                                   run: it ended without its result (a cancelled task never resumes)
--   Suspended (spec.suspend)     -> Suspended: waiting to be resumed (argus resume), as Argo CD
--                                   shows a suspended Job or Rollout
--   Queued, Submitted, Running   -> Progressing, except:
--     Ray refuses the operator's token (RayReachable=False, RayAuthFailed) -> Degraded: only a
--       person fixes the token, and until then nothing is submitted or followed
--     Queued/Unschedulable (no set of worker nodes can hold it) -> Degraded: it never runs until
--       a person shrinks the task or adds nodes
--     the operator cannot reach Ray (RayReachable=False, RayUnreachable) -> Progressing, with
--       "Ray unreachable: ..." in the message: the operator waits out its grace, then the
--       task fails (Degraded) if Ray is still away
--   no status yet, or metadata.generation ahead of status.observedGeneration -> Progressing
-- A task that has ended keeps its health: its spec is immutable and a later spec.cancel
-- changes nothing, so the operator never observes that generation.
local hs = {}

local function detail(status, fallback)
  if status.message ~= nil and status.message ~= "" then
    return status.message
  end
  if status.reason ~= nil and status.reason ~= "" then
    return status.reason
  end
  return fallback
end

local function condition(status, kind)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local status = obj.status
if status == nil or status.phase == nil or status.phase == "" then
  hs.status = "Progressing"
  hs.message = "Waiting for the Argus operator to validate the task"
  return hs
end

local phase = status.phase
local ended = phase == "Succeeded" or phase == "Failed" or phase == "Rejected" or phase == "Stopped"
local generation = obj.metadata and obj.metadata.generation
local observed = status.observedGeneration
if not ended and generation ~= nil and (observed == nil or generation > observed) then
  hs.status = "Progressing"
  hs.message = "Waiting for the Argus operator to observe generation " .. tostring(generation)
  return hs
end

if phase == "Succeeded" then
  hs.status = "Healthy"
  hs.message = detail(status, "The task succeeded")
elseif phase == "Failed" or phase == "Rejected" then
  hs.status = "Degraded"
  hs.message = detail(status, "The task " .. string.lower(phase) .. " without a message")
elseif phase == "Stopped" then
  hs.status = "Degraded"
  hs.message = "Stopped: " .. detail(status, "the task was stopped")
elseif phase == "Suspended" then
  hs.status = "Suspended"
  hs.message = "Suspended: " .. detail(status, "spec.suspend is set")
elseif phase == "Queued" or phase == "Submitted" or phase == "Running" then
  hs.status = "Progressing"
  hs.message = phase .. ": " .. detail(status, "in progress")
  local ray = condition(status, "RayReachable")
  local ray_lost = ray ~= nil and ray.status == "False"
  if (ray_lost and ray.reason == "RayAuthFailed") or status.reason == "RayAuthFailed" then
    hs.status = "Degraded"
    if ray_lost then
      hs.message = phase .. ": " .. detail(ray, "RayAuthFailed")
    end
  elseif phase == "Queued" and status.reason == "Unschedulable" then
    hs.status = "Degraded"
    hs.message = "Unschedulable: " .. detail(status, "no set of worker nodes can hold this task")
  elseif ray_lost then
    hs.message = phase .. ": Ray unreachable: " .. detail(ray, "RayReachable is False")
  end
else
  hs.status = "Unknown"
  hs.message = "Unknown ArgusTask phase " .. tostring(phase)
end
return hs
