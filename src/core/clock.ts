/** The time source. Tests inject their own to move past expiry times without waiting. */
export type Clock = () => Date;
export const systemClock: Clock = () => new Date();
