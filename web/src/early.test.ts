import { describe, expect, it } from 'vitest';
import { OVERVIEW_QUERY } from './pages/Overview';
import { tasksQuery } from './pages/Tasks';
import html from '../index.html?raw';

// index.html starts the landing page's request before the app loads; it only helps
// while its queries are exactly the ones the pages ask for.
describe('the early request in index.html', () => {
  it('asks for the overview the Overview page loads', () => {
    expect(html).toContain(`'${OVERVIEW_QUERY}'`);
  });
  it('builds the task list query in the order the Tasks page does', () => {
    expect(html).toContain("['state', 'project_group', 'resource_group', 'cluster', 'pipeline']");
    expect(html).toContain("p.set('limit', '50')");
    expect(tasksQuery(new URLSearchParams(''))).toBe('/api/v1/tasks?limit=50');
    expect(tasksQuery(new URLSearchParams('cluster=c1&state=Queued')))
      .toBe('/api/v1/tasks?state=Queued&cluster=c1&limit=50');
  });
});
