package celery

import (
	"slices"
	"strconv"
	"strings"
)

// RedisKeys is kombu's layout of keys and channels on Redis for one
// transport configuration (broker_transport_options global_keyprefix, sep
// and priority_steps). The zero value is kombu's default layout for db 0.
type RedisKeys struct {
	// Prefix is global_keyprefix: kombu prepends it to every key it uses
	// (queue lists, binding sets, unacked keys) and to every pub/sub
	// channel it publishes or subscribes to.
	Prefix string
	// Sep is kombu's sep between a queue name and its priority step, and
	// between the fields of a binding; "" means PrioritySep.
	Sep string
	// Steps is priority_steps, ascending; nil means 0, 3, 6, 9.
	Steps []int
	// DB is the broker's database number. Pub/sub ignores databases, so
	// kombu puts "/<db>." in front of fanout channels (fanout_prefix).
	DB int
}

// defaultSteps are kombu's priority_steps.
var defaultSteps = []int{0, 3, 6, 9}

func (k RedisKeys) sep() string {
	if k.Sep == "" {
		return PrioritySep
	}
	return k.Sep
}

func (k RedisKeys) steps() []int {
	if len(k.Steps) == 0 {
		return defaultSteps
	}
	return k.Steps
}

// step is the priority step a message of priority p goes to, as kombu picks
// it: the priority clamped to 0-9, then the largest step not above it
// (kombu's bisect wraps to the last step when every step is above it).
func (k RedisKeys) step(p int) int {
	p = clampPriority(p)
	steps := k.steps()
	i, found := slices.BinarySearch(steps, p)
	if found {
		return steps[i]
	}
	if i == 0 {
		return steps[len(steps)-1]
	}
	return steps[i-1]
}

// Queue is the Redis list a message of the given priority is pushed to:
// the queue itself for step 0, "<queue><sep><step>" for the others.
func (k RedisKeys) Queue(queue string, priority int) string {
	s := k.step(priority)
	if s == 0 {
		return k.Prefix + queue
	}
	return k.Prefix + queue + k.sep() + strconv.Itoa(s)
}

// Queues lists every priority list of queue, lowest step first (the order
// a worker's BRPOP serves them in).
func (k RedisKeys) Queues(queue string) []string {
	steps := k.steps()
	keys := make([]string, 0, len(steps))
	for _, s := range steps {
		if s == 0 {
			keys = append(keys, k.Prefix+queue)
			continue
		}
		keys = append(keys, k.Prefix+queue+k.sep()+strconv.Itoa(s))
	}
	return keys
}

// Binding is the Redis set in which kombu keeps the bindings of an
// exchange: one BindingMember per bound queue.
func (k RedisKeys) Binding(exchange string) string {
	return k.Prefix + "_kombu.binding." + exchange
}

// BindingMember is the member of Binding(exchange) that binds queue with
// routingKey (kombu: "<routing key><sep><pattern><sep><queue>", pattern
// empty). Members are values, not keys: they carry no Prefix.
func (k RedisKeys) BindingMember(routingKey, queue string) string {
	return routingKey + k.sep() + k.sep() + queue
}

// BoundQueues returns the queues of an exchange's binding members (from
// Binding) that a direct exchange routes routingKey to. kombu keeps no
// exchange type in Redis; Celery's task exchanges are direct.
func (k RedisKeys) BoundQueues(members []string, routingKey string) []string {
	var queues []string
	for _, m := range members {
		parts := strings.Split(m, k.sep())
		if len(parts) != 3 || parts[0] != routingKey || parts[2] == "" || slices.Contains(queues, parts[2]) {
			continue
		}
		queues = append(queues, parts[2])
	}
	slices.Sort(queues)
	return queues
}

// Fanout is the pub/sub channel (or pattern) of a fanout exchange such as
// the pidbox's or "celeryev/*".
func (k RedisKeys) Fanout(exchange string) string {
	return k.Prefix + "/" + strconv.Itoa(k.DB) + "." + exchange
}

// SentinelFanout52 is the channel of a fanout exchange as kombu < 5.3
// names it on a sentinel:// broker: its Sentinel channel never fills in
// the db, so the prefix stays "/{db}." literally (Celery 5.2 workers
// publish events and listen for control requests there).
func (k RedisKeys) SentinelFanout52(exchange string) string {
	return k.Prefix + "/{db}." + exchange
}
