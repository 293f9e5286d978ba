-- Argo CD health of an ArgusCluster (argus.io/v1alpha1, cluster-scoped). Install: docs/argocd.md.
--   Deleting=True                   -> Progressing, with its message (the tasks its deletion
--                                      waits for): it goes once they have ended
--   no status, or no RayReachable   -> Progressing: waiting for the operator's first look
--   RayReachable=True               -> Healthy: Ray version, worker nodes, free/total GPUs,
--                                      running and queued tasks; but Degraded when argus
--                                      doctor's last verdict (status.doctor) is Failed: a task
--                                      would fail there
--   RayReachable=False              -> Degraded: the condition's reason (RayUnreachable,
--                                      RayAuthFailed, RayClusterRefUnresolved) and message
--   RayReachable=Unknown            -> Progressing (the operator does not write it)
local hs = {}

local function condition(status, kind)
  if status == nil or status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function text(value)
  if value == nil or value == "" then
    return "?"
  end
  return tostring(value)
end

local function said(c, fallback)
  if c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return fallback
end

local status = obj.status
local deleting = condition(status, "Deleting")
if deleting ~= nil and deleting.status == "True" then
  hs.status = "Progressing"
  hs.message = "Deleting: " .. said(deleting, "waiting for the tasks on it to end")
  return hs
end

local ray = condition(status, "RayReachable")
if ray == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the Argus operator's first look at this Ray cluster"
  return hs
end

if ray.status == "True" and status.doctor ~= nil and status.doctor.verdict == "Failed" then
  hs.status = "Degraded"
  hs.message = "argus doctor: " .. text(status.doctor.failed) .. " check(s) failed: " .. text(status.doctor.message)
elseif ray.status == "True" then
  hs.status = "Healthy"
  hs.message = "Ray " .. text(status.rayVersion) .. ", worker nodes: " .. text(status.workerNodes)
    .. ", GPUs free: " .. text(status.freeGpus) .. "/" .. text(status.gpus)
    .. ", running: " .. text(status.running) .. ", queued: " .. text(status.queued)
elseif ray.status == "False" then
  hs.status = "Degraded"
  local reason = ray.reason
  if reason == nil or reason == "" then
    reason = "RayUnreachable"
  end
  hs.message = reason .. ": " .. said(ray, "the operator cannot read this Ray cluster")
else
  hs.status = "Progressing"
  hs.message = "RayReachable is " .. text(ray.status) .. ": " .. said(ray, "not known yet")
end
return hs
