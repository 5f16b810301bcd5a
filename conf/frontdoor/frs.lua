-- frs.lua: the `lua.frs_auth` action of conf/frontdoor/haproxy.cfg (HAProxy 2.6).
--
--   http-request lua.frs_auth BIZ
--
-- asks frsd `GET /auth?biz=BIZ&key=KEY` (KEY: the variable txn.frs_key, else
-- the client's address; %-escaped here) at FRS_ADDR, an environment variable
-- "IP:port" that haproxy.cfg sets with `setenv` (an IP: Lua sockets do no DNS),
-- and leaves the answer in variables for the rules that follow:
--
--   txn.frs_verdict     "allow" (frsd: 204), "deny" (403), "down" (no answer
--                       within FRS_TIMEOUT_MS, default 500, or a 5xx), "error"
--                       (any other status, such as 404 for a biz map.xml
--                       lacks: a configuration mistake)
--   txn.frs_policy      frsd's RateLimit-Policy   \
--   txn.frs_ratelimit   frsd's RateLimit           } only when frsd sent them
--   txn.frs_retry       frsd's Retry-After        /
--   txn.frs_violated    frsd's FRS-Violated-Policies (on a denial: the rules
--                       that denied, a list of strings)
--   txn.frs_status      frsd's status (0: no answer)
--
-- What to do with each verdict (429, fail-open or fail-closed) is haproxy.cfg's.
--
-- Why a socket and not core.httpclient(): HAProxy 2.6's HTTP client retries a
-- failed connection, 1 s apart, and 2.6 has no setting to stop it (it refuses
-- `httpclient.retries` and `httpclient.timeout.connect`). Measured with
-- HAProxy 2.6.12: with frsd stopped, every httpclient:get took 3.0 s (then a
-- 503), and its `timeout` applied to each try, so 500 ms against a silent frsd
-- took 2.0 s; a fail-open site would have answered every request seconds late
-- for the whole outage. A refused connect on core.tcp() fails at once, and
-- settimeout bounds each step against a silent frsd.

local function escape(s)
  return (string.gsub(s, "[^%w%-._~]", function(c) return string.format("%%%02X", string.byte(c)) end))
end

-- One GET on a new connection: the status (0: none) and the lower-cased headers.
local function get(path)
  local host, port = string.match(os.getenv("FRS_ADDR") or "127.0.0.1:8300", "^%[?([^%]]-)%]?:(%d+)$")
  local s = core.tcp()
  s:settimeout((tonumber(os.getenv("FRS_TIMEOUT_MS")) or 500) / 1000)
  local status, headers = 0, {}
  if host and s:connect(host, tonumber(port))
     and s:send("GET " .. path .. " HTTP/1.1\r\nHost: frsd\r\nConnection: close\r\n\r\n") then
    local line = s:receive("*l")
    status = tonumber(line and string.match(line, "^HTTP/1%.%d (%d%d%d)")) or 0
    while status ~= 0 do
      line = s:receive("*l")
      if line == nil then status = 0 break end        -- cut short: no answer
      line = string.gsub(line, "\r$", "")
      if line == "" then break end                    -- end of the header block
      local name, value = string.match(line, "^([^:]+):%s*(.-)%s*$")
      if name then headers[string.lower(name)] = value end
    end
  end
  s:close()
  return status, headers
end

core.register_action("frs_auth", { "http-req" }, function(txn, biz)
  local key = txn:get_var("txn.frs_key") or txn.f:src() or ""
  local status, h = get("/auth?biz=" .. escape(biz) .. "&key=" .. escape(tostring(key)))
  txn:set_var("txn.frs_status", status)
  local verdict = "error"
  if status == 204 or status == 200 then verdict = "allow"
  elseif status == 403 then verdict = "deny"
  elseif status == 0 or status >= 500 then verdict = "down" end
  txn:set_var("txn.frs_verdict", verdict)
  if verdict ~= "allow" and verdict ~= "deny" then return end
  if h["ratelimit-policy"] then txn:set_var("txn.frs_policy", h["ratelimit-policy"]) end
  if h["ratelimit"] then txn:set_var("txn.frs_ratelimit", h["ratelimit"]) end
  if h["retry-after"] then txn:set_var("txn.frs_retry", h["retry-after"]) end
  if h["frs-violated-policies"] then txn:set_var("txn.frs_violated", h["frs-violated-policies"]) end
end, 1)
