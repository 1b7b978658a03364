package flowfile

import "github.com/onceflow/onceflow"

// RegisterSchedules builds the schedule blocks of defs and registers them on c, whose
// workflows are registered already.
func RegisterSchedules(c *onceflow.Client, defs []*Definition, b *Builder) error {
	ss, err := b.Schedules(defs)
	if err != nil {
		return err
	}
	for _, s := range ss {
		if err := c.RegisterSchedule(s); err != nil {
			return err
		}
	}
	return nil
}
