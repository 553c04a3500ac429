package redisqueue

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/meridianjobs/meridian/queue/driver"
)

// Fleet commands live under the prefix's own tag, so each call touches one
// slot:
//
//	{prefix}:fleet         hash: n the fleet's terminations, p "1" while the fleet is paused
//	{prefix}:fleet:paused  set: the workers paused on their own
//	{prefix}:fleet:term    set: the workers told to terminate on their own
//
// Deregister removes a worker from both sets.

func (q *Queue) fleetKey() string       { return "{" + q.prefix + "}:fleet" }
func (q *Queue) fleetPausedKey() string { return "{" + q.prefix + "}:fleet:paused" }
func (q *Queue) fleetTermKey() string   { return "{" + q.prefix + "}:fleet:term" }

// fleetCommandScript records a command: KEYS = fleet, paused, term; ARGV =
// worker ID ("" for the fleet), command.
var fleetCommandScript = redis.NewScript(`
local F, P, T = KEYS[1], KEYS[2], KEYS[3]
local id, cmd = ARGV[1], ARGV[2]
if id == '' then
  if cmd == 'terminate' then redis.call('HINCRBY', F, 'n', 1)
  elseif cmd == 'pause' then redis.call('HSET', F, 'p', '1')
  else redis.call('HSET', F, 'p', ''); redis.call('DEL', P) end
  return 1
end
if cmd == 'terminate' then redis.call('SADD', T, id)
elseif cmd == 'pause' then redis.call('SADD', P, id)
else redis.call('SREM', P, id) end
return 1
`)

// workerOrdersScript reads one worker's orders at one moment: KEYS =
// fleet, paused, term; ARGV = worker ID. It returns {terminations, fleet
// paused, worker paused, worker terminate}.
var workerOrdersScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'n', 'p')
return {tonumber(v[1] or '0'), v[2] == '1' and 1 or 0, redis.call('SISMEMBER', KEYS[2], ARGV[1]), redis.call('SISMEMBER', KEYS[3], ARGV[1])}
`)

// CommandWorkers records cmd for worker id, or for the fleet when id is ""
// (see driver.Fleet).
func (q *Queue) CommandWorkers(ctx context.Context, id string, cmd driver.WorkerCommand) error {
	doing := "commanding workers"
	if err := ctxErr(ctx, doing); err != nil {
		return err
	}
	if !cmd.Valid() {
		return fmt.Errorf("redisqueue: %s: unknown command %q: %w", doing, cmd, driver.ErrInvalid)
	}
	keys := []string{q.fleetKey(), q.fleetPausedKey(), q.fleetTermKey()}
	if err := fleetCommandScript.Run(ctx, q.rdb, keys, id, string(cmd)).Err(); err != nil {
		return wrap(doing, err)
	}
	return nil
}

// WorkerOrders returns the orders in force for worker id (see
// driver.Fleet).
func (q *Queue) WorkerOrders(ctx context.Context, id string) (driver.WorkerOrders, error) {
	doing := "reading the orders of worker " + id
	if err := ctxErr(ctx, doing); err != nil {
		return driver.WorkerOrders{}, err
	}
	keys := []string{q.fleetKey(), q.fleetPausedKey(), q.fleetTermKey()}
	v, err := workerOrdersScript.RunRO(ctx, q.rdb, keys, id).Int64Slice()
	if err != nil {
		return driver.WorkerOrders{}, wrap(doing, err)
	}
	return driver.WorkerOrders{Terminations: v[0], Paused: v[1] == 1 || v[2] == 1, Terminate: v[3] == 1}, nil
}

// maxPausedWorkers bounds PausedWorkers' list.
const maxPausedWorkers = 1000

// PausedWorkers reports whether the fleet is paused and lists the workers
// paused on their own, sorted, at most 1,000 (see driver.Fleet).
func (q *Queue) PausedWorkers(ctx context.Context) (bool, []string, error) {
	const doing = "listing paused workers"
	if err := ctxErr(ctx, doing); err != nil {
		return false, nil, err
	}
	var fleet *redis.StringCmd
	var ids *redis.StringSliceCmd
	_, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		fleet = p.HGet(ctx, q.fleetKey(), "p")
		ids = p.Sort(ctx, q.fleetPausedKey(), &redis.Sort{Alpha: true, Count: maxPausedWorkers})
		return nil
	})
	if err != nil && err != redis.Nil {
		return false, nil, wrap(doing, err)
	}
	return fleet.Val() == "1", ids.Val(), nil
}
