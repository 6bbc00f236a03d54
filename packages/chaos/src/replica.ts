// `@fenced/chaos/replica`: what a replica of a simulated app imports, kept apart from the
// supervisor's toolkit so that a replica process loads nothing else: the probe that reports how long
// the machine starved it of CPU (see sim/starvation-probe.ts and checker/starvation.ts).
export { startStarvationProbe } from './sim/starvation-probe.js';
