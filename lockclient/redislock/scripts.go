package redislock

import "github.com/redis/go-redis/v9"

// The keys of one lock name, in the order every script takes them. They
// share one hash tag, so that a Redis Cluster keeps them in one slot and a
// script may touch them together.
//
//	KEYS[1] lock  a hash {owner, token}, with the grant's TTL
//	KEYS[2] fence the name's fencing counter, INCR'd by each grant; never expires
//	KEYS[3] queue a list of the owners waiting, oldest first
//	KEYS[4] until a hash owner → the time (Redis's clock, ms) a waiter's place expires
//	KEYS[5] done  the owner of the last clean release, kept for one TTL

// scriptNow is the Lua prelude reading Redis's clock in milliseconds and
// dropping the waiters at the head of the queue whose place expired (they
// stopped refreshing it: crashed or gave up without a word).
const scriptNow = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
while true do
  local head = redis.call('LINDEX', KEYS[3], 0)
  if not head then break end
  local untl = tonumber(redis.call('HGET', KEYS[4], head) or '0')
  if untl > now then break end
  redis.call('LPOP', KEYS[3])
  redis.call('HDEL', KEYS[4], head)
end
local function wake()
  local head = redis.call('LINDEX', KEYS[3], 0)
  if head then redis.call('PUBLISH', ARGV[4] .. head, '1') end
end
`

// acquireScript grants the lock to ARGV[1] (the owner) for ARGV[2] ms when
// nobody holds it and nobody waits ahead of the owner, minting the fencing
// token with INCR in the same script: the grant and its token are one
// atomic step. A retry by the owner of the current grant (the answer to an
// earlier attempt was lost) refreshes and returns that grant. Otherwise,
// with ARGV[3] = "1", it queues the owner, or refreshes its place, for
// ARGV[2] ms. It returns {1, token} for a grant and {0, 0} otherwise.
var acquireScript = redis.NewScript(scriptNow + `
local ttl = tonumber(ARGV[2])
local holder = redis.call('HGET', KEYS[1], 'owner')
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {1, tonumber(redis.call('HGET', KEYS[1], 'token'))}
end
local head = redis.call('LINDEX', KEYS[3], 0)
if not holder and (not head or head == ARGV[1]) then
  if head then
    redis.call('LPOP', KEYS[3])
    redis.call('HDEL', KEYS[4], head)
  end
  local token = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', token)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {1, token}
end
if ARGV[3] == '1' then
  if redis.call('HSET', KEYS[4], ARGV[1], now + ttl) == 1 then
    redis.call('RPUSH', KEYS[3], ARGV[1])
  end
  for i = 3, 4 do
    if redis.call('PTTL', KEYS[i]) < 2 * ttl then redis.call('PEXPIRE', KEYS[i], 2 * ttl) end
  end
end
return {0, 0}
`)

// renewScript extends the grant of ARGV[1] to ARGV[2] ms if, and only if,
// it still holds the lock: 1, or 0 when it does not.
var renewScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`)

// releaseScript deletes the lock if, and only if, ARGV[1] holds it, notes
// the clean release (so that a retry whose first attempt's answer was lost
// is not taken for a loss), and wakes the first waiter. It returns 1 for a
// release (now or by an earlier attempt) and 0 when the grant was gone.
var releaseScript = redis.NewScript(scriptNow + `
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[5], ARGV[1], 'PX', ARGV[2])
  wake()
  return 1
end
if redis.call('GET', KEYS[5]) == ARGV[1] then return 1 end
return 0
`)

// leaveScript takes ARGV[1] out of the queue (a waiter giving up) and wakes
// the new first waiter if the lock is free.
var leaveScript = redis.NewScript(scriptNow + `
redis.call('LREM', KEYS[3], 0, ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then wake() end
return 1
`)
